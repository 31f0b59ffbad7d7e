"""The transaction coordinator's groundwork (issue 38): the `__transaction_state` records
(`log_records`), a transactional id's partition (`partitioning`), the states and the
two-phase transitions of one transactional id (`state`, `metadata`) and the rebuilding of
a partition's table from its records (`loading`). The request handlers, the marker
channel and the timers build on these; docs/transactions.md says how."""
