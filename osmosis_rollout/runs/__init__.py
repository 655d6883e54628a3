"""A run's files and figures: the journal, the report and its model, metrics, statistics and gates, artifacts."""
