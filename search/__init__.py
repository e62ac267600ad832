"""The search engine and CLI: space, model builder, measurement, trial, study driver."""
