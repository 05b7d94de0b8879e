"""Instruction-like content: the passages of a text that address an agent rather than record
something, found in every reading of the text and quoted as written.

Memory is read back into agents' prompts, so text that tries to override an agent's
instructions, give it a new persona, make it send files or secrets to a network address, speak
chat-template or tool-call markup, or leave a "note to the AI reading this" is kept (it may be a
legitimate record of an attack) but flagged. The rules are regular expressions grouped in
families (``rule`` names the family, ``kind`` is one of override, exfiltration, tool_call); the
English ones are here, the other languages' in ``screening_languages``. They run on every view
``screening_normalize.views`` gives (Unicode-normalised, Latin skeleton, leetspeak, ROT13,
visible text of markup, decoded base64/hex/URL runs), and a flag quotes the passage of the
original text the match came from.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from memoryproject.domain.screening_needles import INSTRUCTION_NEEDLES, Needles, needles_register

#: The longest quote of a flagged passage.
PASSAGE_MAX = 120
#: The longest match of any rule (in characters): rules run only this far around their needles.
REACH = 260

OVERRIDE = "override"
EXFILTRATION = "exfiltration"
TOOL_CALL = "tool_call"


@dataclass(frozen=True)
class InstructionRule:
    kind: str  # override | exfiltration | tool_call
    rule: str  # what the passage attempts, as a reviewer reads it
    pattern: LazyPattern
    #: Groups of lower-case text: the rule runs on a view only when it holds one needle of
    #: every group (a match always does), which keeps screening of long text cheap.
    needles: tuple[tuple[str, ...], ...] = ()
    #: Markup that engineering notes quote when they describe it: not flagged inside code.
    markup: bool = False
    #: The language of the rule's words (``en`` rules also read leetspeak and ROT13).
    lang: str = "en"

    #: Per group, its needles the automaton finds and the others (``NeedleSet.plan``).
    plans: tuple[tuple[frozenset[str], tuple[str, ...]], ...] = field(
        default=(), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        needles_register(needle for group in self.needles for needle in group)
        object.__setattr__(self, "plans", tuple(map(INSTRUCTION_NEEDLES.plan, self.needles)))

    def wanted(self, found: Needles) -> bool:
        """Whether the text holds a needle of every group."""
        return found.holds_all(self.plans)

    def windows(self, found: Needles) -> list[tuple[int, int]]:
        """Where a match can be: around every needle of the group found least often (a match
        holds or reaches one of every group, and no match is longer than REACH), merged; the
        whole text when needles are everywhere."""
        size = len(found.lowered)
        whole = [(0, size)]
        if not self.needles or size <= 3 * REACH:
            return whole
        fewest: list[int] | None = None
        for group in self.needles:
            spots = found.group_spots(group)
            if spots is not None and (fewest is None or len(spots) < len(fewest)):
                fewest = spots
        if fewest is None:
            return whole  # windows would cover most of the text anyway
        merged: list[tuple[int, int]] = []
        for at in fewest:
            lo, hi = max(0, at - REACH), min(size, at + REACH)
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        return merged


# Patterns are matched against the lowered text: written case-insensitively here, compiled in
# lower case without re.IGNORECASE, which matches three times faster on long text.
_LETTER = re.compile(r"(?<!\\)(?<!\(\?)[^\W\d_]")


class LazyPattern:
    """A rule's regular expression (letters lowered: screening matches lowered text), compiled
    the first time a text reaches the rule. Compiling the 74 rules costs about 25 ms, which a
    process that never screens instructions (a compile-only MCP server) would pay at start."""

    __slots__ = ("_compiled", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:  # compiled twice at worst, by two threads: the same pattern
            self._compiled = re.compile(_LETTER.sub(lambda m: m.group().lower(), self.source))
        return self._compiled

    def finditer(
        self, text: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text, pos, endpos)


def _rx(pattern: str) -> LazyPattern:
    return LazyPattern(pattern)


def lowered(text: str) -> str:
    """``text`` in lower case, one character for one (the offsets of a match stay)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _needles(*groups: str) -> tuple[tuple[str, ...], ...]:
    """Groups of needles, the shorter (and commoner) first: a group is found at its first."""
    return tuple(tuple(sorted(g.split("|") if g != "|" else ["|"], key=len)) for g in groups)


_QUALIFIER = (
    r"(?:previous|prior|above|earlier|preceding|initial|original|system|developer|safety"
    r"|existing|current|old|former|given|other|operator)"
)
_TARGET = (
    r"(?:instructions?|prompts?|directives?|guidelines|rules|messages?|guardrails|policies"
    r"|context|programming|orders|commands|constraints|restrictions|training)"
)
_IGNORE = (
    r"(?:ignore|disregard|forget|override|bypass|discard|skip|drop|abandon|neglect|set\s+aside"
    r"|throw\s+out|pay\s+no\s+attention\s+to|stop\s+following|no\s+longer\s+follow"
    r"|do\s+not\s+follow|don'?t\s+follow)"
)
_AGENT = (
    r"(?:ai|a\.i\.|llm|language\s+model|assistant|agent|model|bot|chatbot|gpt|claude|copilot"
    r"|gemini|automated\s+(?:system|reader|agent))"
)
_STRONG_PATH = (
    r"(?:(?:~|\$HOME|/root|/home/[\w.-]+)/\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)"
    r"|/etc/(?:passwd|shadow|sudoers)\b|\.aws/credentials\b|\.netrc\b|\.git-credentials\b"
    r"|\.kube/config\b|\.docker/config\.json\b|\.pgpass\b)"
)
# The lookahead names every first character of a path, so other positions fail at once.
_ANY_PATH = (
    rf"(?=[~$/.ip])(?:{_STRONG_PATH}|(?<![\w.])\.env\b(?![.\w])|\bprintenv\b|\$\(\s*env\s*\))"
)
# A gap inside one sentence: a dot only when it is part of a word, path or URL.
_GAP = r"(?:[^\n.;!?]|\.(?=\S))"
_SEND = (
    r"\b(?:exfiltrat\w*|send|sends|sending|upload\w*|post|email|e-mail|leak|transmit|forward"
    r"|paste|smuggle|curl|wget|scp|rsync|nc|netcat|beacon|ship)\b"
)
_READ = r"\b(?:cat|read|print|dump|show|reveal|output|display|base64|copy|include|type)\b"
_LOOT = (
    r"(?:api[\s_-]?keys?|secret\s+keys?|secrets|credentials|access\s+tokens?|tokens|passwords"
    r"|env(?:ironment)?\s+(?:variables|vars)|env\s+file|ssh\s+keys?|private\s+keys?"
    r"|session\s+cookies|cookies|conversation(?:\s+history)?|chat\s+history|system\s+prompt"
    r"|memory\s+contents|all\s+(?:the\s+)?memories)"
)
_DESTINATION = (
    r"(?:https?://|ftp://|wss?://|\b[\w.+-]+@[\w-]+\.[\w.]+|\b\d{1,3}(?:\.\d{1,3}){3}\b"
    r"|\b(?:webhook|pastebin|requestbin|ngrok|my\s+server|this\s+(?:url|address|endpoint|server)"
    r"|the\s+(?:following|attacker'?s?)\s+(?:url|address|endpoint|server)))"
)
_LOCAL = r"(?:localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0|\[::1\]|[\w.-]+\.(?:internal|local|svc|corp))"

_IGNORE_NEEDLES = (
    "ignor|disregard|forget|overrid|bypass|discard|skip|drop|abandon|neglect|aside|throw out"
    "|attention|stop follow|longer follow|not follow|don't follow|dont follow|void|null|cancel"
    "|revoked|lifted|suspended|no longer"
)
_TARGET_NEEDLES = (
    "instruction|prompt|directive|guideline|rule|message|guardrail|polic|context|programming"
    "|order|command|constraint|restriction|training|everything|all "
)
_AGENT_NEEDLES = (
    " ai|ai |ai:|ai,|a.i.|llm|language model|assistant|agent|model|bot|gpt|claude|copilot|gemini"
    "|automated"
)
_SEND_NEEDLES = (
    "exfiltrat|send|upload|post|email|e-mail|leak|transmit|forward|paste|smuggle|curl|wget|scp"
    "|rsync|nc |netcat|beacon|ship"
)
_STRONG_NEEDLES = ".ssh|id_|/etc/|.aws|.netrc|.git-cred|.kube|.docker|.pgpass"
_LOOT_NEEDLES = (
    "key|secret|credential|token|password|env|cookie|conversation|chat history|system prompt|memor"
)
_DEST_NEEDLES = (
    "http|ftp:|ws:|wss:|@|webhook|pastebin|requestbin|ngrok|my server|this url|this address"
    "|this endpoint|this server|following url|following address|following endpoint|attacker"
)
# The rules' names (what a flag says), which the rules in other languages share
# (screening_languages).
IGNORE_PREVIOUS = "ignore previous instructions"
REPLACES_INSTRUCTIONS = "replaces the agent's instructions"
ROLE_PLAY = "role-play jailbreak"
NOTE_TO_AI = "note to the AI reading this"
KEEPS_USER_DARK = "keeps the user in the dark"
SENDS_SECRETS = "sends secrets to a network address"
RUNS_TOOL = "tells the agent to run a tool or command"

RULES: tuple[InstructionRule, ...] = (
    InstructionRule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        _rx(
            rf"\b{_IGNORE}\s+(?:(?:all|any|the|your|of|everything|these|those|my|its)\s+)*"
            rf"{_QUALIFIER}\s+(?:\w+\s+)?{_TARGET}\b"
            rf"|\b{_IGNORE}\s+(?:all\s+)?(?:of\s+)?(?:your|the\s+(?:assistant|agent|model|ai)'?s?)"
            rf"\s+(?:\w+\s+)?{_TARGET}\b"
            r"|\b(?:ignore|disregard|forget)\s+(?:everything|all)\s+(?:above|before|said|you\s+"
            r"(?:were|have\s+been)\s+told|(?:that\s+)?(?:came|was\s+written)\s+before)"
            r"|\bdisregard\s+(?:the\s+|your\s+|all\s+)?(?:instructions|system\s+prompt|guidelines)"
            rf"|\b(?:your|all|the|{_QUALIFIER})\s+{_TARGET}\s+(?:are|is|have\s+been)\s+(?:now\s+)?"
            r"(?:void|null|cancell?ed|revoked|lifted|suspended|no\s+longer\s+(?:valid|apply"
            r"|in\s+effect|binding))"
        ),
        _needles(_IGNORE_NEEDLES, _TARGET_NEEDLES),
    ),
    InstructionRule(
        OVERRIDE,
        REPLACES_INSTRUCTIONS,
        _rx(
            r"\b(?:your|the\s+(?:ai|assistant|agent|model)'?s?)\s+(?:new|real|actual|true|updated"
            r"|only|hidden)\s+(?:system\s+)?(?:instructions?|prompt|rules|task|objective|goal"
            r"|directives?|orders)\s+(?:is|are|will\s+be)\b"
            r"|\b(?:new|updated|revised|real|hidden)\s+(?:system\s+)?(?:instructions?|prompt"
            r"|directives?|orders)\s*(?:for\s+(?:the\s+|any\s+)?"
            rf"{_AGENT}\s*)?:\s*(?:you|from\s+now|ignore|always|never|do\b|reply|respond|obey)"
        ),
        _needles(
            "new|real|actual|true|updated|revised|only|hidden",
            "instruction|prompt|rules|task|objective|goal|directive|orders",
        ),
    ),
    InstructionRule(
        OVERRIDE,
        REPLACES_INSTRUCTIONS,
        _rx(
            rf"\bfrom\s+now\s+on,?\s+(?:you|the\s+{_AGENT})\s+(?:will|must|shall|are\s+to"
            r"|should)\s+(?:only\s+|always\s+|never\s+)?(?:ignore|obey|respond|answer|act|reply"
            r"|pretend|comply|refuse|be\s+(?:an?\s+)?(?:unrestricted|unfiltered|evil|DAN))"
            r"|\b(?:system|admin(?:istrator)?|developer|root)\s+(?:override|command|notice)\s*:"
            r"|\bi\s+am\s+(?:your|the\s+(?:system'?s?|model'?s?))\s+(?:developer|creator"
            r"|administrator|admin|owner|operator|programmer)\b"
        ),
        _needles("from now on|override|command|notice|i am your|i am the"),
    ),
    InstructionRule(
        OVERRIDE,
        ROLE_PLAY,
        _rx(
            r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:DAN\b|in\s+\w+\s+mode|an?\s+(?:\w+\s+)?"
            r"(?:unrestricted|unfiltered|uncensored|evil|jailbroken|rogue)|bound\s+by|restricted"
            r"|an?\s+ai\s+(?:with(?:out)?|that|who))"
        ),
        _needles("you are now|you are no longer"),
    ),
    InstructionRule(
        OVERRIDE,
        ROLE_PLAY,
        _rx(
            r"\b(?:act|behave|pretend|role-?play|respond)\s+(?:as|like|to\s+be|that\s+you\s+are"
            r"|as\s+if\s+you\s+(?:were|are))\s+(?:an?\s+)?(?:\w+\s+)?(?:DAN\b|unrestricted"
            r"|unfiltered|uncensored|jailbroken|evil|rogue|amoral|(?:ai|assistant|model|chatbot)"
            r"\s+(?:with\s+no|without|that\s+(?:has\s+no|ignores|never\s+refuses)))"
            r"|\bpretend\s+(?:that\s+)?you\s+(?:have|are\s+under)\s+no\s+(?:rules|restrictions"
            r"|filters|guidelines|limits)"
        ),
        _needles(
            "act|behave|pretend|role|respond",
            "dan|unrestricted|unfiltered|uncensored|jailbroken|evil|rogue|amoral|with no|without"
            "|has no|ignores|never refuses|no rules|no restrictions|no filters|no guidelines"
            "|no limits",
        ),
    ),
    InstructionRule(
        OVERRIDE,
        ROLE_PLAY,
        _rx(
            r"\bdo\s+anything\s+now\b|\b(?:developer|god|jailbreak|DAN|unrestricted|sudo)\s+mode"
            r"\s+(?:is\s+)?(?:enabled|activated|on|engaged)\b|\b(?:enable|activate|enter|switch\s+to)"
            r"\s+(?:developer|god|jailbreak|DAN|unrestricted|sudo)\s+mode\b"
            r"|\b(?:new|real|actual|true|hidden)\s+system\s+(?:prompt|instructions?)\s*:"
            r"|\bstay\s+in\s+character\b[^\n]{0,60}\b(?:no\s+matter|whatever|even\s+if|never\s+break)"
            r"|\blet'?s\s+play\s+a\s+game\b[^\n]{0,80}\byou\s+(?:are|will\s+be)\b"
        ),
        _needles("anything now| mode|system prompt:|system instruction|in character|play a game"),
    ),
    InstructionRule(
        OVERRIDE,
        ROLE_PLAY,
        _rx(
            r"\b(?:with\s+no|without\s+(?:any\s+)?|free\s+(?:of|from)\s+(?:all\s+|any\s+)?)"
            r"(?:ethical|moral|safety|content)\s+(?:guidelines|restrictions|filters|limits|rules)"
            r"|\b(?:simulate|imagine|roleplay|role-play)\s+(?:being\s+|you\s+are\s+)?(?:an?\s+)?"
            rf"(?:\w+\s+)?{_AGENT}\s+(?:with\s+no|without|that\s+(?:has\s+no|ignores|never))"
            r"|\byour\s+(?:new\s+)?(?:name|persona|identity)\s+is\s+(?:now\s+)?\w+[^\n]{0,60}"
            r"\b(?:no\s+(?:rules|restrictions|limits|filters)|unrestricted|ignore)"
        ),
        _needles(
            "ethical|moral|safety|content|simulate|imagine|role|your name|your new|your persona"
            "|your identity",
            "with no|without|free of|free from|has no|ignores|never|unrestricted|ignore",
        ),
    ),
    InstructionRule(
        OVERRIDE,
        NOTE_TO_AI,
        _rx(
            r"\b(?:note|message|instructions?|reminder|attention|memo|p\.?s\.?|fyi|warning)\s*"
            rf"(?:to|for)\s+(?:the\s+|any\s+|all\s+|an?\s+|every\s+|you,?\s+(?:the\s+)?)?{_AGENT}s?"
            r"\b(?:\s+(?:that\s+is\s+|who\s+is\s+|which\s+is\s+)?(?:reading|processing|summari[sz]ing"
            r"|parsing|reviewing|analy[sz]ing|ingesting|indexing|seeing|retrieving)\b|\s*[:,-])"
            rf"|\b(?:to|for)\s+(?:the\s+|any\s+|all\s+|an?\s+)?{_AGENT}s?\s+(?:that\s+is\s+|who\s+is\s+"
            r"|which\s+is\s+)?(?:reading|processing|summari[sz]ing|parsing|reviewing|ingesting)\s+"
            r"(?:this|these|the\s+following|my)"
            rf"|\bif\s+you\s+are\s+an?\s+{_AGENT}\b[^\n]{{0,80}}?\b(?:ignore|disregard|do\s+not\s+tell"
            r"|don'?t\s+(?:tell|mention)|never\s+mention|secretly|without\s+telling|send|reveal"
            r"|recommend|say\s+that|respond\s+with|reply\s+with|append|insert|include|you\s+must)"
            rf"|\bwhen\s+(?:an?|the|any)\s+{_AGENT}\s+(?:reads|summari[sz]es|processes|sees"
            r"|retrieves|ingests)\s+this"
            rf"|\b(?:hidden|secret|special|private)\s+(?:instructions?|message|note)s?\s+(?:for|to)"
            rf"\s+(?:the\s+|any\s+)?{_AGENT}"
        ),
        _needles(
            _AGENT_NEEDLES,
            "note|message|instruction|reminder|attention|memo|p.s|ps |fyi|warning|reading"
            "|processing|summari|parsing|reviewing|ingesting|if you are|when ",
        ),
    ),
    InstructionRule(
        OVERRIDE,
        NOTE_TO_AI,
        _rx(
            rf"(?:^|[\n(\[*>#/-]\s*)(?:the\s+)?{_AGENT}s?\s*(?:reading\s+this\s*)?[:,]\s*"
            r"(?:please\s+)?(?:ignore|disregard|forget|do\s+not\s+tell|don'?t\s+tell|you\s+must"
            r"|from\s+now)"
        ),
        _needles(_AGENT_NEEDLES, "ignore|disregard|forget|tell|must|from now"),
    ),
    InstructionRule(
        OVERRIDE,
        KEEPS_USER_DARK,
        _rx(
            r"\bdo\s+not\s+(?:tell|inform|alert|warn|notify|mention\s+(?:this|it)\s+to)\s+the\s+user"
            r"|\bdon'?t\s+(?:tell|inform|alert|warn|let)\s+the\s+user(?:\s+know)?\b"
            r"|\bnever\s+(?:tell|inform|reveal\s+(?:this\s+)?to|mention\s+(?:this\s+)?to)\s+the\s+user"
            r"|\bkeep\s+(?:this|it)\s+(?:secret|hidden|quiet)\s+from\s+the\s+user"
        ),
        _needles("user", "tell|inform|alert|warn|notify|mention|let the|keep this|keep it|reveal"),
    ),
    InstructionRule(
        OVERRIDE,
        "chat template markup",
        _rx(
            r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id"
            r"|end_header_id|begin_of_text|eom_id|channel|message|start|end|im_sep)\|>"
            r"|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>|<\|?(?:system|developer)\|?>\s*\S"
        ),
        _needles("<|[inst]|[/inst]|<<sys|<</sys|_of_turn>|<system|<developer"),
        markup=True,
    ),
    InstructionRule(
        OVERRIDE,
        "chat template markup",
        _rx(
            r"(?:^|\n)\s*(?:#{1,3}\s*)?(?:\[|<)?(?:system|developer)(?:\]|>|\s*:)\s*"
            r"(?:prompt\s*:\s*)?(?:you\b|your\b|ignore\b|from\s+now|new\s+instructions|obey\b)"
            r"|(?:^|\n)\s*(?:human|user)\s*:[^\n]{0,200}\n\s*(?:assistant|ai)\s*:"
        ),
        _needles("system|developer|human|user", "you|ignore|from now|obey|assistant:|ai:"),
        markup=True,
    ),
    InstructionRule(
        EXFILTRATION,
        "sends a sensitive file",
        _rx(rf"{_SEND}{_GAP}{{0,80}}?{_ANY_PATH}|{_ANY_PATH}{_GAP}{{0,80}}?{_SEND}"),
        _needles(_STRONG_NEEDLES + "|.env|printenv|$(", _SEND_NEEDLES),
    ),
    InstructionRule(
        EXFILTRATION,
        "reads a private key or credentials file",
        _rx(rf"{_READ}{_GAP}{{0,40}}?{_STRONG_PATH}"),
        _needles(
            _STRONG_NEEDLES,
            "cat|read|print|dump|show|reveal|output|display|base64|copy|include|type",
        ),
    ),
    InstructionRule(
        EXFILTRATION,
        SENDS_SECRETS,
        # Anchored on the verb, the loot and the address looked for ahead in the same sentence:
        # linear in the text, where a gap between alternations would be quadratic.
        _rx(rf"{_SEND}(?={_GAP}{{0,80}}?\b{_LOOT}\b)(?={_GAP}{{0,160}}?{_DESTINATION})"),
        _needles(_SEND_NEEDLES, _LOOT_NEEDLES, _DEST_NEEDLES),
    ),
    InstructionRule(
        EXFILTRATION,
        SENDS_SECRETS,
        _rx(
            rf"\b{_LOOT}\b(?={_GAP}{{0,40}}?\b(?:to|at|into)\s+{_DESTINATION})"
            r"|(?:https?|ftp|wss?)://\S{0,200}+(?=" + _GAP + r"{0,60}?\b(?:with|containing"
            rf"|including|append(?:ing)?)\s+(?:the\s+|all\s+|your\s+|every\s+)?{_LOOT})"
        ),
        _needles(_LOOT_NEEDLES, _DEST_NEEDLES),
    ),
    InstructionRule(
        EXFILTRATION,
        SENDS_SECRETS,
        _rx(r"!\[[^\]\n]{0,80}\]\(https?://[^)\s]{0,200}[?&][\w-]+=(?:\{|\$|<|\[|%7B)"),
        _needles("![", "?|&"),
    ),
    InstructionRule(
        EXFILTRATION,
        SENDS_SECRETS,
        _rx(r"\b(?:printenv|env|set)\s*\|\s*(?:curl|nc|netcat|wget)\b"),
        _needles("|", "printenv|env|set", "curl|nc|netcat|wget"),
    ),
    InstructionRule(
        EXFILTRATION,
        SENDS_SECRETS,
        _rx(
            r"\bos\.environ\b[^\n]{0,80}\b(?:requests|urllib|httpx|fetch)\b"
            r"|\b(?:requests|httpx)\.post\([^\n]{0,120}\bos\.environ"
        ),
        _needles("os.environ", "requests|urllib|httpx|fetch"),
    ),
    InstructionRule(
        EXFILTRATION,
        "reveals the system prompt",
        _rx(
            r"\b(?:reveal|print|repeat|output|show|leak|dump|disclose|tell\s+me|share|recite)\s+"
            r"(?:me\s+)?(?:all\s+)?(?:of\s+)?(?:your|the\s+(?:hidden|secret|original|initial))\s+"
            r"(?:\w+\s+)?(?:system\s+prompt|instructions|initial\s+prompt|prompt|hidden\s+rules"
            r"|configuration|guidelines)"
            r"|\b(?:repeat|print|output)\s+(?:all\s+)?(?:the\s+)?(?:text|words|everything)\s+"
            r"(?:above|before\s+this)(?:\s+verbatim)?"
        ),
        _needles(
            "reveal|print|repeat|output|show|leak|dump|disclose|tell me|share|recite",
            "your|hidden|secret|original|initial|above|before this",
        ),
    ),
    InstructionRule(
        EXFILTRATION,
        "uploads with curl or wget",
        _rx(
            rf"\b(?:curl|wget)\b(?![^\n|;&]{{0,200}}?://{_LOCAL})[^\n|;&]{{0,200}}?\s(?:-d|--data"
            r"(?:-binary|-raw|-urlencode)?|-F|--form|-T|--upload-file|--post-file|--post-data)"
            r"[\s=]*[\"']?(?:[\w-]+=)?(?:@|\$\(|`)"
        ),
        _needles("curl|wget", "-d|--data|-f|--form|-t|--upload|--post"),
    ),
    InstructionRule(
        TOOL_CALL,
        "pipes a download into a shell",
        _rx(r"\b(?:curl|wget)\b[^\n]{0,200}?\|\s*(?:sudo\s+)?(?:ba|z|da|k|fi)?sh\b"),
        _needles("curl|wget", "|"),
    ),
    InstructionRule(
        TOOL_CALL,
        "destructive or reverse-shell command",
        _rx(
            r"\brm\s+-(?:rf|fr|r\s+-f|f\s+-r)\s+(?:--no-preserve-root\s+)?(?:/|~|\$HOME|\*)"
            r"(?=\s|$|\*|[\"'`])"
            r"|/dev/tcp/|\bnc\b[^\n]{0,40}\s-e\s|\bbash\s+-i\b|\bmkfs(?:\.\w+)?\s+/dev/"
            r"|\bdd\s+if=[^\n]{0,60}of=/dev/[sh]d|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"
            r"|\bchmod\s+-R\s+777\s+/(?=\s|$)"
        ),
        _needles("rm -|/dev/| nc |bash -i|mkfs|dd if|:(|chmod -r"),
    ),
    InstructionRule(
        TOOL_CALL,
        "tool-call markup",
        _rx(
            r"</?(?:tool_call|tool_use|function_calls?|invoke|antml:invoke|tool_code)\b[^>]{0,80}>"
            r"|\"(?:tool_calls?|function_call|tool_name|tool_use)\"\s*:"
            r"|\{\s*\"(?:name|tool)\"\s*:\s*\"[\w.-]+\"\s*,\s*\"(?:arguments|parameters|input"
            r"|args)\"\s*:"
            r"|<\|python_tag\|>|(?:^|\n)\s*Action\s*:\s*\w+\s*\n\s*Action\s+Input\s*:"
        ),
        _needles(
            '<tool_|<function_|<invoke|<antml|"tool_|"function_call|"name"|"tool"|python_tag'
            "|action input"
        ),
        markup=True,
    ),
    InstructionRule(
        TOOL_CALL,
        RUNS_TOOL,
        _rx(
            r"\b(?:you\s+must|you\s+should|you\s+will|immediately|silently|secretly)\s+(?:now\s+)?"
            r"(?:run|execute|call|invoke|use)\s+(?:the\s+|this\s+|a\s+)?(?:\w+\s+){0,2}?"
            r"(?:tool|command|shell|script|function)s?\b"
        ),
        _needles(
            "you must|you should|you will|immediately|silently|secretly",
            "tool|command|shell|script|function",
        ),
    ),
    InstructionRule(
        TOOL_CALL,
        RUNS_TOOL,
        _rx(
            r"\b(?:run|execute|call|invoke)\s+(?:the\s+)?(?:following|this|these)\s+(?:shell\s+)?"
            r"(?:commands?|scripts?|tools?|code)\s+(?:now|immediately|silently|without\s+"
            r"(?:asking|confirmation|telling|approval))"
            r"|\bwithout\s+(?:asking|telling|informing|notifying|alerting)\s+(?:the\s+)?user\b"
        ),
        _needles("now|immediately|silently|without"),
    ),
)


@dataclass(frozen=True)
class Flag:
    """One instruction-like passage: where, what kind, which rule, and the passage quoted."""

    field: str
    kind: str
    rule: str
    passage: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "kind": self.kind, "rule": self.rule, "passage": self.passage}

    def quote(self) -> str:
        return f'{self.field}: "{self.passage}" ({self.kind}: {self.rule})'


def passage(text: str, start: int, end: int) -> str:
    """The line around a match, cut to about PASSAGE_MAX characters around it ("…" marks a
    cut), white space collapsed."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    left = max(line_start, start - 30) if line_end - line_start > PASSAGE_MAX else line_start
    right = min(line_end, left + PASSAGE_MAX)
    quote = " ".join(text[left:right].split())
    return ("…" if left > line_start else "") + quote + ("…" if right < line_end else "")


_CODE = re.compile(r"```[\s\S]*?(?:```|$)|~~~[\s\S]*?(?:~~~|$)|`[^`\n]+`")


def code_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` quotes code (fenced blocks and inline code spans)."""
    return [m.span() for m in _CODE.finditer(text)] if "`" in text or "~~~" in text else []
