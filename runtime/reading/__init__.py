"""Reading the Page itself, apart from how a call arrived (`runtime/transports/`): the probe's reads of the live
document (`probe`), what a write would commit (`commit`) and what the viewport shows first (`viewport`)."""
