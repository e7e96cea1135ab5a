"""Generate SQL that provably parses, with grammars/sql_select.lark and the default model.

    python examples/sql_generation.py "names of users older than 30"
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import constrained

GRAMMAR = Path(__file__).resolve().parents[1] / "grammars" / "sql_select.lark"
SCHEMA = "users(id, name, email, age, city), orders(id, user_id, amount, status)"

if __name__ == "__main__":
    request = sys.argv[1] if len(sys.argv) > 1 else "names of users older than 30"
    sql = constrained.generate(f"Tables: {SCHEMA}. Write one SQLite query: {request}.", grammar=GRAMMAR,
                               max_tokens=80)
    print(sql.strip())
    con = sqlite3.connect(":memory:")
    con.executescript("CREATE TABLE users(id, name, email, age, city); CREATE TABLE orders(id, user_id, amount, status);")
    con.execute("EXPLAIN " + sql)       # parses: the grammar guarantees the syntax
    print("SQLite parses it.")
