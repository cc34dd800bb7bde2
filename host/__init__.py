"""The host app, `computer-use app`: the console that owns the chat, the turns and the tokens.

It sits above the runtime and uses only its public API (`runtime.assembly.Runtime`, the host side of the capability
tokens, the first-party client adapter, the models); the runtime never imports it, and it never imports the
backends, the lab or the suites.
"""
