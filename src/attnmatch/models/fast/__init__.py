"""CPU speed paths of the paper models, kept beside them.

Each `models/<paper>.py` holds the paper's model as the paper describes it; `models/fast/<paper>.py`
holds its whole-input inference on the CPU: the pairs of `Matcher.predict` taken in length-sorted
windows (`_windows.py`), each distinct text of a window encoded once, the computation rearranged
for speed, equal to the model's `forward` up to float rounding (tests/models/test_*_inference.py).
A fast module imports its paper model, never the other way round, and registers its path by the
model's class (`register_inference`); `Matcher.predict` asks `inference_for(model)` on the CPU in
float32. Every fast module is imported here, explicitly, so a path is registered whenever this
package is importable. docs/speed.md has the measurements.
"""

from attnmatch.models.fast import damm, hcrn, iarnn, mpcnn, mvlstm  # noqa: F401
from attnmatch.models.fast._registry import InferencePath, inference_for, register_inference

__all__ = ["InferencePath", "inference_for", "register_inference"]
