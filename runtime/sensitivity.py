"""Which names and URLs say a write is sensitive: the name layer of `needs_user` (docs/policy.md).

Page text is untrusted and written to slip past filters, so every name is normalized first (NFKC, invisible and bidi
characters stripped, look-alike letters folded, case folded) and then matched against a fixed, multilingual table of
*concepts*. The answer is always a concept word from that table, never page text: the caller puts it in a message
the model reads, and page text must never reach a message. Pure logic, no I/O; every pattern is ours and compiled
once here.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote_plus, urlsplit

MAX_CHARS = 2_000
"""Names are cut to this many code points before any work, so a huge name costs a bounded, small amount."""
MAX_URL_CHARS = 8_192
"""URLs are cut here: above any URL the schema admits, so no keyword can hide past the cut."""

ACTIVATING_ROLES: frozenset[str] = frozenset(
    {
        "button",
        "link",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "option",
        "treeitem",
        "gridcell",
        "switch",
        "checkbox",
        "radio",
        "tab",
    }
)
"""Roles whose activation can commit something; which of them a concept applies to is the policy's decision."""

# Look-alikes of Latin letters, by exact code point (case matters: Greek Ν looks like N, ν like v).
_CONFUSABLES: dict[str, str] = {
    # Cyrillic
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X",
    "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ԁ": "D", "Һ": "H", "Ԛ": "Q", "Ԝ": "W", "Ӏ": "I",
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d",
    "һ": "h", "ԛ": "q", "ԝ": "w", "ӏ": "l", "к": "k", "ѵ": "v", "ү": "y",
    # Greek
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Υ": "Y", "Χ": "X",
    "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "υ": "u", "χ": "x",
    # Armenian
    "օ": "o", "ս": "u", "հ": "h", "ո": "n",
    # Latin letters outside ASCII that pass for ASCII ones
    "ɡ": "g", "ɑ": "a", "ı": "i", "ɩ": "i", "ȷ": "j", "ʏ": "y", "ɪ": "i",
}  # fmt: skip
_ASCII_LETTER = re.compile(r"[A-Za-z]")
_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
_STRIPPED = frozenset({"Cf", "Mn", "Me"})  # format (zero-width, bidi, soft hyphen) and combining marks
_APOSTROPHES = str.maketrans(dict.fromkeys("’‘ʼ´`′ʻ", "'"))
_CJK = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _clean(text: str) -> str:
    """Cut, NFKC, apostrophes unified, dashes and underscores as spaces, invisible characters and marks stripped."""
    text = unicodedata.normalize("NFKC", text[:MAX_CHARS]).translate(_APOSTROPHES)
    return "".join(
        " " if unicodedata.category(c) in ("Pd", "Pc") else c for c in text if unicodedata.category(c) not in _STRIPPED
    )


def _finish(text: str) -> str:
    """Casefold (which can emit a combining dot: İ → i̇, stripped again) and collapse whitespace."""
    text = "".join(c for c in text.casefold() if unicodedata.category(c) not in _STRIPPED)
    return _SPACE.sub(" ", text).strip()


def _fold_word(match: re.Match[str]) -> str:
    word = match.group()
    if not any(c in _CONFUSABLES for c in word):
        return word
    mixed = _ASCII_LETTER.search(word) is not None
    all_alike = all(c in _CONFUSABLES for c in word if c.isalpha() and not _ASCII_LETTER.match(c))
    return "".join(_CONFUSABLES.get(c, c) for c in word) if mixed or all_alike else word


def normalize(text: str) -> str:
    """The form names are compared in: what a person reads, with the tricks a page can play on a filter undone.

    Look-alike letters are folded only in a word that mixes them with ASCII letters or consists of them alone, so
    "Рау" (Cyrillic) reads "pay" while a genuine Russian word such as "Оплатить" keeps its letters.
    """
    return _finish(_WORD.sub(_fold_word, _clean(text)))


def _plain(text: str) -> str:
    """`normalize` without the look-alike fold: a genuine word made only of look-alikes still matches its lexicon."""
    return _finish(_clean(text))


# -- the concept table ------------------------------------------------------------------------------------------
# Latin-script phrases (en, de, fr, es, pt, it, ru) match on word boundaries; CJK phrases (zh, ja, ko) as
# substrings. Phrases are written casefolded (ß as "ss") with dashes as spaces, as `normalize` leaves them.
_D = r"(?:(?:the|your|my|this|a|an) )?"  # an optional English determiner
_CONCEPTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "close account",
        (
            rf"close {_D}account",
            r"konto (?:schliessen|kündigen|auflösen)",
            r"(?:fermer|clôturer) (?:mon |le |votre )?compte",
            r"cerrar (?:mi |la |tu )?cuenta",
            r"encerrar (?:minha |a |sua )?conta",
            r"chiudi (?:il )?(?:mio )?(?:conto|account)",
            r"закрыть (?:сч[её]т|аккаунт|учётную запись|учетную запись)",
        ),
        (r"注销(?:账户|账号|帐号|帐户)", r"退会", r"회원 ?탈퇴", r"계정 ?해지"),
    ),
    (
        "change password",
        (
            rf"(?:change|reset|update) {_D}password",
            r"passwort ändern",
            r"(?:changer|modifier) (?:de |le |mon |votre )?mot de passe",
            r"cambiar (?:la |mi |tu )?contraseña",
            r"(?:alterar|mudar) (?:a |minha |sua )?senha",
            r"(?:cambia|modifica) (?:la )?password",
            r"(?:изменить|сменить) пароль",
        ),
        (r"(?:修改|更改|重置)密码", r"パスワード(?:を|の)?変更", r"비밀번호 ?변경"),
    ),
    (
        "change email",
        (
            rf"(?:change|update) {_D}e ?mail(?: address)?",
            r"e ?mail(?: adresse)? ändern",
            r"(?:changer|modifier) (?:d'|l'|mon |votre )?(?:adresse )?e ?mail",
            r"cambiar (?:el |mi |tu )?(?:correo|e ?mail)",
            r"alterar (?:o |meu |seu )?e ?mail",
            r"(?:изменить|сменить) (?:e ?mail|почту)",
        ),
        (r"(?:修改|更改)邮箱", r"メールアドレス(?:を|の)?変更", r"이메일 ?변경"),
    ),
    (
        "cancel subscription",
        (
            rf"cancel {_D}(?:subscription|membership|plan|contract)",
            r"(?:abo|abonnement|mitgliedschaft|vertrag|verträge)?(?: (?:jetzt|hier))? ?kündigen",
            r"résilier(?: (?:mon |l'|votre )?abonnement)?",
            r"annuler (?:mon |l'|votre )?abonnement",
            r"cancelar (?:la |mi |tu |a |minha |sua )?(?:suscripción|assinatura)",
            r"(?:annulla|disdici) (?:l')?abbonamento",
            r"disdici",
            r"отменить подписку",
        ),
        (r"取消订阅", r"退订", r"解約", r"구독 ?(?:취소|해지)", r"해지하기"),
    ),
    ("checkout", (r"(?:checkout|check out) now", rf"complete {_D}checkout", r"express checkout"), ()),
    (
        "withdraw",
        (
            r"withdraw(?:al)?",
            r"auszahlen|geld abheben",
            r"retirer de l'argent|effectuer un retrait",
            r"retirar (?:dinero|fondos)",
            r"sacar(?: dinheiro)?",
            r"preleva|prelievo",
            r"вывести(?: средства| деньги)?|снять деньги",
        ),
        (r"提现", r"出金", r"引き出", r"출금"),
    ),
    (
        "transfer",
        (
            r"transfer|send money|wire (?:money|funds)",
            r"überweisen|überweisung (?:absenden|ausführen|senden)",
            r"virement|effectuer (?:le |un )?virement",
            r"transferir|transferencia|transferência|enviar dinero|enviar dinheiro|fazer pix",
            r"trasferisci|(?:esegui |invia )?bonifico",
            r"перевести(?: деньги)?|перевод средств",
        ),
        (r"转账", r"汇款", r"振込", r"振り込", r"送金", r"송금", r"이체"),
    ),
    (
        "pay",
        (
            r"pay|repay|prepay",
            rf"(?:make|submit|complete|authori[sz]e|confirm|send) {_D}payment",
            r"(?:continue|proceed|go) to payment",
            r"(?:jetzt )?bezahlen|jetzt zahlen|zahlung (?:abschliessen|bestätigen|senden|ausführen)",
            r"payer|(?:procéder au|valider le|effectuer le|confirmer le) paiement",
            r"pagar|(?:realizar|confirmar|efetuar|finalizar) (?:el |o )?(?:pago|pagamento)",
            r"paga|pagare|(?:procedi al|conferma(?:re)?(?: il)?) pagamento",
            r"оплатить|заплатить|оплатите",
        ),
        (r"支付", r"付款", r"支払", r"決済", r"결제", r"지불"),
    ),
    (
        "buy",
        (
            r"buy",
            r"purchase(?! history)",
            r"(?:jetzt )?kaufen|kauf abschliessen",
            r"acheter|(?:finaliser|valider|confirmer) (?:l'|mon )?achat",
            r"comprar|finalizar (?:la )?compra",
            r"acquista(?:re)?|compra ora|compra adesso",
            r"купить|оформить покупку",
        ),
        (r"购买", r"購入", r"買う", r"구매", r"구입"),
    ),
    (
        "order",
        (
            rf"(?:place|submit|confirm|complete) {_D}order|order now|order and pay",
            r"(?:jetzt |zahlungspflichtig |kostenpflichtig )?bestellen|bestellung (?:absenden|abschicken|aufgeben)",
            r"commander|(?:passer|valider|confirmer) (?:la |ma |votre )?commande",
            r"(?:realizar|hacer|confirmar|tramitar|finalizar|fazer) (?:el |o |mi |meu )?pedido|pedir ahora",
            r"encomendar",
            r"ordina (?:ora|adesso)|(?:conferma|invia|completa|effettua)(?:re)? (?:l'|il )?ordine",
            r"заказать|оформить заказ|подтвердить заказ",
        ),
        (
            r"下单",
            r"提交订单",
            r"确认订单",
            r"注文(?!履歴|一覧|状況|番号|照会)",
            r"주문(?! ?(?:내역|조회|목록|번호|상태))",
        ),
    ),
    (
        "subscribe",
        (
            rf"(?:start|begin|activate|buy|purchase) {_D}(?:paid )?(?:subscription|membership|plan)",
            r"subscribe (?:now )?(?:for|at) |subscribe and pay",
            r"(?:abo|abonnement) abschliessen|kostenpflichtig abonnieren",
            r"souscri(?:re|vez|s)",
            r"contratar (?:el |la )?(?:plan|suscripción)|suscribirse por",
            r"assinar|assine|iniciar assinatura",
            r"abbonati|abbonarsi|sottoscrivi|attiva (?:l')?abbonamento",
            r"оформить подписку|подключить подписку",
        ),
        (r"开通", r"有料(?:会員)?登録", r"定期購入", r"유료 ?구독", r"구독 ?시작"),
    ),
    (
        "delete",
        (
            r"delete|erase|permanently remove",
            r"löschen",
            r"supprimer|effacer",
            r"eliminar|borrar",
            r"excluir|apagar",
            r"elimina|eliminare|cancella",
            r"удалить|стереть",
        ),
        (r"删除", r"削除", r"삭제"),
    ),
    (
        "remove",
        (r"remove", r"entfernen", r"retirer", r"quitar|remover", r"rimuovi|rimuovere", r"убрать"),
        (r"移除", r"제거"),
    ),
    (
        "deactivate",
        (
            rf"deactivate|disable {_D}account",
            r"deaktivieren",
            r"désactiver",
            r"desactivar|desativar",
            r"disattiva",
            r"деактивировать",
        ),
        (r"停用", r"注销", r"無効化", r"비활성화", r"탈퇴"),
    ),
    (
        "send",
        (r"send", r"(?:ver)?senden", r"envoyer", r"enviar", r"invia|inviare", r"отправить"),
        (r"发送", r"送信", r"보내기", r"전송"),
    ),
    (
        "confirm",
        (
            rf"confirm {_D}(?:order|payment|purchase|transfer|deletion|booking|reservation|transaction|withdrawal)",
            r"(?:zahlung|bestellung|kauf|überweisung|löschung|buchung) bestätigen",
            r"confirmer (?:le |la |l'|mon |ma |votre )?(?:paiement|commande|achat|virement|suppression|réservation)",
            r"confirmar (?:el |la |o |a |mi )?(?:pago|pagamento|pedido|compra|transferencia|transferência|reserva)",
            r"conferma(?:re)? (?:il |la |l')?(?:pagamento|ordine|acquisto|bonifico|prenotazione|eliminazione)",
            r"подтвердить (?:оплату|заказ|покупку|перевод|удаление|бронирование)",
        ),
        (
            r"确认(?:支付|付款|订单|购买|转账|删除|下单)",
            r"確定",
            r"(?:결제|주문|구매|송금|이체|삭제|예약) ?확인",
            r"확정",
        ),
    ),
    (
        "sign in",
        (
            r"sign ?in|log ?in|sign on|log on",
            r"anmelden|einloggen",
            r"se connecter|connexion|s'identifier",
            r"iniciar sesión|ingresar|entrar|fazer login|iniciar sessão",
            r"accedi",
            r"войти|вход",
        ),
        (r"登录", r"登入", r"登陆", r"ログイン", r"サインイン", r"로그인"),
    ),
)

# A bare confirm word as the whole label: it commits whatever the dialog asked, which the name cannot tell.
# Korean 확인 is left out on purpose: alone it is the everyday "OK" (docs/policy.md).
_BARE_CONFIRM = re.compile(
    r"[\W_]*(?:yes[\W_]+)?(?:confirm|(?:jetzt )?bestätigen|confirmer|confirmar|conferma|confermare|подтвердить|"
    r"确认|確認(?:する)?)(?:[\W_]+now)?[\W_]*"
)

# Any subscribe word next to a price is a paid commitment ("Subscribe — €9.99/month"); alone it is a newsletter.
_SUBSCRIBE_WORD = re.compile(
    r"(?<!\w)(?:subscribe|abonnieren|s'abonner|abonnez vous|suscribir(?:se|te)?|inscrever se|iscriviti|"
    r"подписаться)(?!\w)|订阅|購読|구독"
)
_PRICE = re.compile(
    r"[$€£¥₩₽]\s?\d|\d\s?(?:[$€£¥₩₽]|eur|usd|gbp|руб|円|元|원)|(?<!\w)(?:per|a|/) ?(?:month|year|week)(?!\w)|"
    r"/ ?(?:mo|yr|monat|mois|mes|mês|mese|месяц)(?!\w)|monthly|yearly|每月|月額|매월"
)

# Benign uses blanked out before a concept is matched: editing a list or a filter is not a sensitive write.
_FILTERS = r"filters?|tags?|selection|filter|filtres?|filtros?|filtri|filtro|фильтры?|筛选|过滤|필터|フィルター"
_BENIGN: dict[str, re.Pattern[str]] = {
    "remove": re.compile(
        rf"remove (?:all )?{_D}(?:{_FILTERS})|remove (?:(?:this |the )?(?:item|product) )?from {_D}"
        r"(?:cart|basket|bag|wishlist|list|favou?rites|comparison|saved items)|remove (?:this )?item"
        r"|(?:alle )?(?:filter) entfernen|aus (?:dem )?(?:warenkorb|merkzettel) entfernen"
        r"|retirer (?:le |les |ce |du |cet )?(?:filtres?|panier|article)|retirer du panier"
        r"|quitar (?:el |los )?filtros?|quitar del carrito|remover (?:os )?filtros?|remover do carrinho"
        r"|rimuovi (?:i |il )?filtr[oi]|rimuovi dal carrello|убрать фильтры?"
        r"|移除(?:筛选|过滤)|필터 ?제거"
    ),
    "delete": re.compile(
        rf"delete {_D}(?:{_FILTERS})|(?:alle )?filter löschen|effacer (?:les |tous les )?filtres"
        r"|borrar (?:los )?filtros|cancella (?:i |tutti i )?filtri|cancella tutto"
    ),
}

_LATIN_EDGE = (r"(?<!\w)(?:", r")(?!\w)")
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (
        concept,
        re.compile(
            "|".join(
                ([_LATIN_EDGE[0] + "|".join(latin) + _LATIN_EDGE[1]] if latin else [])
                + ([f"(?:{'|'.join(cjk)})"] if cjk else [])
            )
        ),
    )
    for concept, latin, cjk in _CONCEPTS
)
CONCEPTS: frozenset[str] = frozenset(concept for concept, _, _ in _CONCEPTS)
"""Every concept word `sensitive` can return."""


def sensitive(*texts: str) -> str | None:
    """The concept the first sensitive text names (e.g. "pay"), from our table; None if no text names one.

    Each text is matched in its normalized form and in its unfolded form, so look-alike tricks and genuine words in
    scripts with look-alike letters are both caught. Concepts are tried most specific first ("close account"
    before "delete", "cancel subscription" before "subscribe").
    """
    for text in texts:
        forms = {normalize(text), _plain(text)}
        for concept, pattern in _PATTERNS:
            benign = _BENIGN.get(concept)
            if any(pattern.search(benign.sub("\0", form) if benign else form) for form in forms):
                return concept
        if any(_SUBSCRIBE_WORD.search(form) and _PRICE.search(form) for form in forms):
            return "subscribe"
        if any(_BARE_CONFIRM.fullmatch(form) for form in forms):
            return "confirm"
    return None


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if any(c.isalpha() for c in w)]


def mismatch(name: str, visible: str) -> bool:
    """True when the visible text shows words the accessible name does not say: the name hides what a person sees.

    Every visible word must appear in the name (as a word; CJK runs as substrings), after normalizing both. Icons,
    symbols, digits and empty text carry no words, so an icon button named "Search" or "Close" never mismatches,
    and a name that says the visible words and more never does.
    """
    said = normalize(name)
    said_words = set(_WORD.findall(said))
    return any(
        word not in said_words and not (_CJK.search(word) and word in said) for word in _words(normalize(visible))
    )


# -- URLs -------------------------------------------------------------------------------------------------------
_URL_KEYWORDS: dict[str, str] = {
    "delete": "delete",
    "destroy": "delete",
    "erase": "delete",
    "remove": "remove",
    "pay": "pay",
    "checkout": "checkout",
    "transfer": "transfer",
    "unsubscribe": "unsubscribe",
    "logout": "sign out",
    "signout": "sign out",
    "logoff": "sign out",
    "cancel": "cancel",
    "confirmorder": "order",
    "confirmpayment": "pay",
    "confirmpurchase": "buy",
    "confirmtransfer": "transfer",
    "purchase": "buy",
    "buy": "buy",
    "placeorder": "order",
    "submitorder": "order",
    "withdraw": "withdraw",
    "deactivate": "deactivate",
    "closeaccount": "close account",
}
# What may follow a keyword in one lower-case token ("deleteaccount", "removeitem", "paynow").
_URL_OBJECTS = ("", "account", "user", "item", "items", "all", "me", "now", "post", "comment", "file", "card", "data")
_URL_SEARCH_KEYS = frozenset({"q", "query", "search", "s", "term", "keyword", "keywords", "text"})
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_URL_TOKEN = re.compile(r"[^\W\d_]+")


def _url_concept(token: str) -> str | None:
    for keyword, concept in _URL_KEYWORDS.items():
        if token.startswith(keyword) and token[len(keyword) :] in _URL_OBJECTS:
            return concept
    return None


def _url_tokens(text: str) -> list[str]:
    for _ in range(3):  # double-encoded keywords ("%2564elete") are decoded too, a bounded number of times
        decoded = unquote_plus(text)
        if decoded == text:
            break
        text = decoded
    return _URL_TOKEN.findall(_CAMEL.sub(" ", text).casefold())


def sensitive_url(url: str) -> str | None:
    """The side effect a GET URL's path or query names (e.g. "delete" for `/delete?id=1`), or None.

    Keywords count as whole path words, query keys or query values (camelCase, dashes and encodings split), alone
    or as a pair ("place-order", "log/out"). A listing such as `/orders` names none. Values of search keys (`q`,
    `search`, ...) are free text someone typed and are not read. Host and fragment are not read either.
    """
    url = url[:MAX_URL_CHARS]
    try:
        parts = urlsplit(url)
        texts = [parts.path]
        for pair in parts.query.split("&"):
            key, _, value = pair.partition("=")
            texts.append(key)
            if unquote_plus(key).casefold() not in _URL_SEARCH_KEYS:
                texts.append(value)
    except ValueError:
        texts = [url]  # not a URL Python can split: read all of it rather than none
    for text in texts:
        tokens = _url_tokens(text)
        for i, token in enumerate(tokens):
            concept = _url_concept(token) or (_url_concept(token + tokens[i + 1]) if i + 1 < len(tokens) else None)
            if concept:
                return concept
    return None
