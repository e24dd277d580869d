"""The front end: a model in, checked and made canonical; nothing here knows of e-graphs.

- `io`: load, check, normalize (shape inference, folding), save
- `interface`: the graph inputs, defaults and outputs an output keeps
- `names`: fresh value names, unique in a whole model
- `symbols`: symbolic shape facts (dims as sizes or symbols)
- `shape_chains`, `zero_states`, `decided_ifs`: run-time shape chains, zero states and Ifs made static
- `fix_shapes`: input dims made static on request (`--fix-input-shape`)

Layer rule (tests/test_structure.py): imports only `eqsat.errors`/`eqsat.metadata` and itself.
"""
