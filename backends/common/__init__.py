"""What the MCP-child backends share: the stdio child owner (`child`), the target watcher (`watch`) and the
normalization of an ARIA-like tree into the runtime's `Snapshot` (`normalize`)."""
