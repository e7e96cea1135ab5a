"""Extract a contact and an invoice as schema-valid JSON with the default model.

    python examples/extract_contact_invoice.py
"""

from __future__ import annotations

import json

import constrained

CONTACT = {"type": "object", "properties": {"name": {"type": "string"},
                                            "email": {"type": "string", "format": "email"},
                                            "phone": {"type": "string"}},
           "required": ["name", "email"]}
INVOICE = {"type": "object", "properties": {"number": {"type": "string"}, "total": {"type": "number"},
                                            "currency": {"enum": ["EUR", "USD", "GBP"]},
                                            "paid": {"type": "boolean"}},
           "required": ["number", "total", "currency", "paid"]}

if __name__ == "__main__":
    print(json.dumps(constrained.extract(CONTACT, "Reach Ada Lovelace at ada@example.org, +44 20 7946 0958.")))
    print(json.dumps(constrained.extract(INVOICE, "Invoice INV-2041 over 1250.00 EUR is still unpaid.")))
