-- portfolio_symbols answers "who traded this symbol"; this index only cost
-- a write per stored transaction.
DROP INDEX transactions_by_symbol;
