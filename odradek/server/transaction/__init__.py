"""The transaction coordinator: transactional ids, their state in ``__transaction_state``."""
