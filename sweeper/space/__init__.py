"""The sweep's space: the YAML read through the gate, checked against its sections' declarations, planned into
trial configurations, and the JSON Schemas written from the same declarations. The bottom layer of sweeper: may
import nmt_core (its config, family and gates) and sweeper.design, nothing else of sweeper."""
