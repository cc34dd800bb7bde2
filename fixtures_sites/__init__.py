"""The lab's fixture web server and its scenario pages (DOM, canvas, popup, CAPTCHA, login, sensitive submits,
prompt injection, frames, stalls, a chat Page)."""
