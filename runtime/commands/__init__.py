"""The four commands' rules, one module each (`list_pages` needs none: it is the Page Context itself); the service
(`runtime/service.py`) checks the capability, resolves the session and dispatches to them."""
