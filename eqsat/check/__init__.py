"""The checks: differential verification of an optimized model against its input.

- `verify`: run both models on the same inputs, compare within the rules' tolerance
- `verify_inputs`: sizes for dynamic dims, the user's shapes and arrays
- `verify_values`: the drawn values; `verify_consumers`: what each consumer accepts of them
- `verify_facts`: shape facts per candidate, the element budget, random outputs

Layer rule: imports the front end and the base only (never the engine: a check trusts no rule).
"""
