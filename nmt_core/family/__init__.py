"""The attention family and the architectures, declared: one torch-free class per `attention.*` value and per
`model.arch`, and the questions the rest of the project asks of them (allowed values, rules, labels, settings,
diagnostics). Imports nothing of the project, not even for type hints, so that validating a config loads no torch
and no model; the modules that compute each part (nmt_core.models) bind to these declarations by name."""
