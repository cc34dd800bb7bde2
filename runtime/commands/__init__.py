"""The three commands on a session, one object each (`Observe`, `Act`, `Verify`; `list_pages` needs none: it is the
Page Context itself), and what they share (`base.py`). The service (`runtime/service.py`) makes them from its
`Parts`, checks the capability, resolves the session and dispatches to them."""
