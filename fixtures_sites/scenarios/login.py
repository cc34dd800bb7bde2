"""login: a sign-in form (email, password, "Remember me", "Forgot password?") that POSTs one write.

`/login/forgot` is the password-reset page its link leads to; its form POSTs `/login/reset` (write).
"""

from fixtures_sites.routes import Route, done_page, page

SCENARIO = "login"

ROUTES = (
    Route("GET", "/login/", page("login/index.html"), SCENARIO),
    Route(
        "POST", "/login/submit", done_page("Signed in", "Welcome back! You are now signed in."), SCENARIO, write=True
    ),
    Route("GET", "/login/forgot", page("login/forgot.html"), SCENARIO),
    Route(
        "POST",
        "/login/reset",
        done_page("Check your email", "If an account exists for that address, we sent a link to reset your password."),
        SCENARIO,
        write=True,
    ),
)
