"""The ring3 rewriting assembler: AT&T parsing, rewrite rules, and the driver."""
