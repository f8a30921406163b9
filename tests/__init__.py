"""Tests: fast unit tests plus slow end-to-end tests against real local servers."""
