"""JSON Schema -> Grammar IR: resolution, keyword translation, formats, patterns, numbers."""
