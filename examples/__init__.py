"""Examples of hosts for toolledger sessions (docs/hosts.md); not part of the package."""
