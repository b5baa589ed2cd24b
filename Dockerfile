# attnmatch serve on CPU, as a non-root user, with a model directory mounted at /model:
#   docker build -t attnmatch .
#   docker run --rm -p 8000:8000 -v "$PWD/runs/demo/model:/model:ro" attnmatch
# The server binds to 0.0.0.0 inside the container (it prints a warning unless a key is set:
# `docker run -e ATTNMATCH_API_KEY=...` requires `Authorization: Bearer ...`); publish the port
# only where a trusted network or a proxy guards it.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
# CPU-only torch first, so pip never pulls a CUDA build.
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install ".[torch,serve]"

RUN useradd --create-home --uid 10001 attnmatch
USER attnmatch
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
ENTRYPOINT ["attnmatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["/model"]
