"""Auditor's batteries: large seeded runs that print one summary line each."""
