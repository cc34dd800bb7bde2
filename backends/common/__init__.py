"""What the MCP-child backends share: the stdio child owner (`child`), the life of an MCP-child backend
(`child_backend`) and the normalization of an ARIA-like tree into the runtime's `Snapshot` (`normalize`)."""
