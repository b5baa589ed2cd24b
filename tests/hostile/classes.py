"""The classes of the hostile-input battery (docs/robustness.md); each case's id starts with one."""

CLASSES = {
    "c1": "user text read as markup or terminal control",
    "c2": "failures that were tracebacks (damaged files, OS errors, odd paths)",
    "c3": "runs lost or misreported (lock, resume, folder swap, leftovers, killed workers)",
    "c4": "bad data or values accepted (labels, groups, duplicates, weights, JSON, options)",
    "c5": "paths from user input escaping their folder",
    "c6": "input size (tokens and characters per text)",
    "c7": "errors that do not say where (file, line, split, field)",
    "c8": "side effects (global settings, umask, byte-order mark)",
}
