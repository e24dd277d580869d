"""The engine: the term language, encoding into egglog, saturation, the decoded e-graph, lowering.

- `terms`: one constructor per modelled ONNX op (the op table)
- `rule`, `rule_closure`: rule records, and which rules a model can use
- `encode`, `bulk`: a graph as egglog load rows
- `backend`, `prepared`: the one module that talks to egglog, and backends kept per process
- `saturate`: the bounded schedule and its run report
- `egraph`: the serialized e-graph decoded into typed tables
- `lower`: an extraction back to ONNX

`eqsat.rewrites` (rule families) and `eqsat.extract` (cost models, targets, extractors) are engine-level
packages in folders of their own. Layer rule: imports the front end and the base, never the checks, the
views, the pipeline or the interface.
"""
