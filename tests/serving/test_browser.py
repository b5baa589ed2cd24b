"""The web page of `attnmatch serve` in a real browser: a uvicorn server in a background thread
with two tiny random models (aMV-LSTM, which has attention, and CBOW-MLP, which has not), and
headless Chromium driven by selenium. Skipped, with the reason, where Chromium, chromedriver or
selenium is missing.

`ATTNMATCH_SCREENSHOT=docs/serving-page.png` also saves the page's screenshot there."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from attnmatch.data.vocab import Vocab
from attnmatch.inputs import WordVectorInputs, WordVectorsConfig
from attnmatch.matcher import Matcher
from attnmatch.models import model_type_of
from attnmatch.tasks import Task
from tests.models.conftest import VOCAB, tiny_model

uvicorn = pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")

CHROMIUM = "/usr/bin/chromium"
# Real words, so the heat map (and the screenshot in docs/) reads as text; the model is random.
WORDS = (
    "how are glaciers formed a glacier is persistent body of dense ice that constantly moving "
    "under its own weight forms where accumulation snow exceeds ablation over many years the "
    "in and to"
).split()
QUERY = "how are glaciers formed"
CANDIDATES = [
    "a glacier is a persistent body of dense ice",
    "glaciers form where the accumulation of snow exceeds its ablation over many years",
    "a glacier is constantly moving under its own weight",
    "<b>snow</b> & ice",  # markup in user text must show as text
]


def _matcher(name: str) -> Matcher:
    model = tiny_model(name)
    vocab = Vocab(["<pad>", "<unk>", *WORDS[: VOCAB - 2]])
    inputs = WordVectorInputs(WordVectorsConfig(vectors="random", dim=8), vocab)
    kind = Task(kind="ranking")
    return Matcher(model=model.eval(), model_type=model_type_of(name), inputs=inputs, task=kind)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, dict[str, Matcher]]]:
    """The base URL of a live server and its models (the first has attention)."""
    from attnmatch.serving import ServeSettings, create_app

    models = {"amvlstm": _matcher("amvlstm_q"), "cbow": _matcher("cbow_mlp")}
    app = create_app(models, settings=ServeSettings(max_candidates=8))
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    live = uvicorn.Server(config)
    thread = threading.Thread(target=live.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not live.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the test server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", models
    live.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not Path(driver_path).is_file():
        pytest.skip("chromedriver is not installed (apt-get install chromium-driver)")
    binary = shutil.which("chromium") or CHROMIUM
    if not Path(binary).is_file():
        pytest.skip("chromium is not installed (apt-get install chromium)")
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.binary_location = binary
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def _wait(driver: Any, condition: Any, what: str, timeout: float = 20) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition, message=f"timed out waiting for {what}")


def _open(driver: Any, url: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url + "/")
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"), "the model list")


def _rank(driver: Any, model: str, query: str, candidates: list[str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "model")).select_by_value(model)
    for field, text in (("query", query), ("candidates", "\n".join(candidates))):
        box = driver.find_element(By.ID, field)
        box.clear()
        box.send_keys(text)
    driver.find_element(By.ID, "rank").click()


def _rows(driver: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")


def test_rank_then_heat_map(
    server: tuple[str, dict[str, Matcher]], browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    url, models = server
    _open(browser, url)
    names = [
        o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#model option")
    ]
    assert names == ["amvlstm", "cbow"]
    _rank(browser, "amvlstm", QUERY, CANDIDATES)
    _wait(browser, lambda d: len(_rows(d)) == len(CANDIDATES), "the results")

    expected = models["amvlstm"].rank(QUERY, CANDIDATES)
    shown = [[c.text for c in row.find_elements(By.TAG_NAME, "td")] for row in _rows(browser)]
    assert [r[0] for r in shown] == [str(i) for i in range(1, len(CANDIDATES) + 1)]
    assert [r[2] for r in shown] == [e.text for e in expected]  # markup shown as typed
    assert [float(r[1]) for r in shown] == pytest.approx([e.score for e in expected], abs=1e-4)
    assert not browser.find_elements(By.CSS_SELECTOR, "#results b")  # never parsed as markup
    assert browser.find_element(By.ID, "error").text == ""

    target = next(i for i, e in enumerate(expected) if e.text == CANDIDATES[1])
    _rows(browser)[target].click()
    heat = "#heatmap .matrix table"
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, heat), "the heat map")
    explained = models["amvlstm"].explain(QUERY, CANDIDATES[1])
    columns = browser.find_elements(By.CSS_SELECTOR, f"{heat} thead th")[1:]
    rows = browser.find_elements(By.CSS_SELECTOR, f"{heat} tbody th")
    assert [c.text for c in columns] == explained["right_tokens"]
    assert [r.text for r in rows] == explained["left_tokens"] == QUERY.split()
    cells = browser.find_elements(By.CSS_SELECTOR, f"{heat} tbody td")
    interaction = explained["interaction"].mean(axis=0).ravel()  # the mean over channels
    assert [float(c.get_attribute("data-value")) for c in cells] == pytest.approx(
        interaction.tolist(), abs=1e-5
    )
    colours = {c.value_of_css_property("background-color") for c in cells}
    assert len(colours) > 1  # coloured by value

    # The 1-D gate over the query's tokens draws as bars, under the matrix and on its own.
    from selenium.webdriver.support.ui import Select

    labels = "#heatmap .bars > span:not(.legend)"
    assert [b.text for b in browser.find_elements(By.CSS_SELECTOR, labels)] == QUERY.split()
    Select(browser.find_element(By.ID, "map-name")).select_by_value("left_gate")
    assert not browser.find_elements(By.CSS_SELECTOR, heat)
    assert [b.text for b in browser.find_elements(By.CSS_SELECTOR, labels)] == QUERY.split()
    gate = explained["left_gate"]
    widths = [
        b.get_attribute("style") for b in browser.find_elements(By.CSS_SELECTOR, "#heatmap .bar")
    ]
    assert widths[int(abs(gate).argmax())] == "width: 100%;"
    Select(browser.find_element(By.ID, "map-name")).select_by_value("interaction")

    shot = tmp_path / "page.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if target_path := os.environ.get("ATTNMATCH_SCREENSHOT"):
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target_path)


def test_messages(server: tuple[str, dict[str, Matcher]], browser: Any) -> None:
    from selenium.webdriver.common.by import By

    url, _ = server
    _open(browser, url)
    error = browser.find_element(By.ID, "error")

    # A model without attention: a clear message instead of a heat map.
    _rank(browser, "cbow", QUERY, CANDIDATES[:2])
    _wait(browser, lambda d: len(_rows(d)) == 2, "the results")
    _rows(browser)[0].click()
    heatmap = browser.find_element(By.ID, "heatmap")
    _wait(browser, lambda d: "no attention maps" in heatmap.text, "the no-attention message")
    assert "cbow" in heatmap.text

    # A request the server refuses (more candidates than max_candidates): its detail is shown.
    _rank(browser, "amvlstm", QUERY, [f"candidate {i}" for i in range(9)])
    _wait(browser, lambda d: error.text, "the error message")
    assert error.text.startswith("/v1/rank: ")
    assert "8" in error.text and "candidates" in error.text

    # An empty query is caught before any request.
    _rank(browser, "amvlstm", " ", CANDIDATES[:1])
    _wait(browser, lambda d: error.text == "Type a query.", "the empty-query message")
