"""Research tooling over the library: paper tables, claims, searches and analyses.

- `reproduce`: `attnmatch reproduce TABLE`, a paper table's rows over seeds (results/*.json, .md);
- `results_index`: results/README.md, the index of those tables;
- `claims`: `attnmatch reproduce claims`, each paper's claims decided with paired tests;
- `tune`: `attnmatch tune`, a hyper-parameter search on dev (Optuna);
- `analysis`: `attnmatch analyze`, attention by position in saved models.

The library (`attnmatch`, `Matcher`, models, inputs, data, training, serving) never imports this
package; these modules import the library.
"""
