"""Instruction-like content in the languages memory is written in besides English: German,
French, Spanish, Portuguese, Italian, Russian, Chinese, Japanese and Korean.

Each language has the families attackers translate most: overriding earlier instructions, an
unrestricted persona, sending secrets somewhere, a note addressed to the AI reading the text,
and keeping the user in the dark. The rules run on the Unicode-normalised view (scripts kept),
so a fullwidth or zero-width-split phrase reads as plain. Languages written without spaces
(Chinese, Japanese) bound their gaps by characters within one sentence instead of by words.
"""

from __future__ import annotations

from memoryproject.domain.screening_instructions import (
    EXFILTRATION,
    IGNORE_PREVIOUS,
    KEEPS_USER_DARK,
    NOTE_TO_AI,
    OVERRIDE,
    ROLE_PLAY,
    SENDS_SECRETS,
    InstructionRule,
    _rx,
)


def _rule(kind: str, rule: str, lang: str, pattern: str, *needles: str) -> InstructionRule:
    groups = tuple(tuple(sorted(group.split("|"), key=len)) for group in needles)
    return InstructionRule(kind, f"{rule} ({lang})", _rx(pattern), groups, lang=lang)


#: Words that show a text is (partly) in a language written in Latin letters: its rules run
#: only then (the other scripts' rules need text outside ASCII).
LANGUAGE_MARKERS: dict[str, tuple[str, ...]] = {
    # Words no English sentence uses, and the letters the language writes with.
    "de": (
        " und ",
        " der ",
        " die ",
        " das ",
        " nicht ",
        " ist ",
        " du ",
        " ich ",
        " mit ",
        " alle ",
        " bitte ",
        "ä",
        "ö",
        "ü",
        "ß",
    ),
    "fr": (
        " les ",
        " des ",
        " est ",
        " pas ",
        " tu ",
        " vous ",
        " et ",
        " une ",
        " du ",
        " le ",
        " la ",
        "é",
        "è",
        "à",
        "ç",
        "l'",
    ),
    "es": (
        " las ",
        " los ",
        " el ",
        " que ",
        " y ",
        " es ",
        " una ",
        " del ",
        " para ",
        "ñ",
        "á",
        "í",
        "ó",
        "ú",
        "¿",
        " la ",
    ),
    "pt": (
        " não ",
        " você ",
        " os ",
        " para ",
        " que ",
        " uma ",
        " da ",
        " e ",
        " o ",
        "ã",
        "õ",
        "ç",
        "é",
    ),
    "it": (
        " il ",
        " che ",
        " di ",
        " non ",
        " gli ",
        " una ",
        " della ",
        " le ",
        " la ",
        " e ",
        "à",
        "è",
        "ò",
        "ù",
    ),
}


_W = r"(?:[\w'’-]+\s+)"  # one word and its space
_URL = r"(?:https?://|\S+@\S+\.\w+|\b\d{1,3}(?:\.\d{1,3}){3}\b)"
_CJK_GAP = r"[^。！？\n.!?]"

LANGUAGE_RULES: tuple[InstructionRule, ...] = (
    # --- German
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "de",
        rf"\b(?:ignorier|vergiss|vergesst|missacht|übergeh|verwirf|verwerft)\w*\s+{_W}{{0,4}}?"
        r"(?:vorherig|bisherig|obig|vorangegangen|früher|alle|ursprünglich|system|deine)\w*\s+"
        rf"{_W}{{0,2}}?(?:anweisung|instruktion|regel|vorgab|befehl|richtlinie|prompt|anleitung)"
        r"|\b(?:vorherig|bisherig|obig|alle|ursprünglich|deine)\w*\s+(?:anweisung|instruktion"
        rf"|regel|vorgab|befehl|richtlinie)\w*\s+{_W}{{0,3}}?(?:ignorier|vergess|vergiss|missacht"
        r"|gelten\s+nicht\s+mehr|sind\s+(?:ungültig|aufgehoben))",
        "ignorier|vergiss|vergesst|missacht|übergeh|verwirf|verwerft|vergess|gelten|ungültig"
        "|aufgehoben",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "de",
        r"\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort|ab\s+jetzt)\s+" + _W + r"{0,3}?(?:KI|Assistent"
        r"|Modell|DAN|Bot|Chatbot)\w*\s+(?:ohne|die\s+keine|der\s+keine|das\s+keine)"
        r"|\b(?:tu|tue|tut)\s+so,?\s+als\s+(?:ob\s+du|wärst\s+du|hättest\s+du)"
        r"|\bohne\s+(?:jegliche\s+|irgendwelche\s+)?(?:Einschränkungen|Regeln|Filter|Zensur"
        r"|ethische\s+Grenzen)\s+(?:antworten|handeln|agieren)",
        "du bist|tu |tue |tut |ohne",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "de",
        rf"\b(?:send|schick|übermittel|lad|kopier|poste|leite)\w*\s+{_W}{{0,6}}?(?:schlüssel"
        r"|passw|geheimnis|zugangsdat|token|api-key|\.env|umgebungsvariabl|ssh|anmeldedat)\w*"
        + rf"\s+{_W}{{0,5}}?(?:an|zu|nach|auf)\s+{_URL}",
        "send|schick|übermittel|lad|kopier|poste|leite",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "de",
        r"\b(?:hinweis|notiz|nachricht|anweisung|mitteilung)\s+(?:an|für)\s+(?:die|den|das|jede)?"
        r"\s*(?:KI|Assistent\w*|Sprachmodell|Agent\w*|LLM)\b"
        r"|\b(?:an|liebe)\s+(?:die\s+|den\s+)?(?:KI|Assistent\w*|Sprachmodell|LLM),?\s+"
        r"(?:die|der|das)\s+(?:dies|diesen|diese|das)\s+(?:liest|verarbeitet|zusammenfasst)",
        "ki|assistent|sprachmodell|agent|llm",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "de",
        r"\b(?:sag|erzähl|verrat|teil)\w*\s+(?:es\s+|das\s+|davon\s+)?(?:dem\s+)?(?:Benutzer|Nutzer"
        r"|Anwender)\s+nichts|\bohne\s+(?:den\s+)?(?:Benutzer|Nutzer|Anwender)\s+zu\s+(?:fragen"
        r"|informieren|benachrichtigen)",
        "benutzer|nutzer|anwender",
    ),
    # --- French
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "fr",
        rf"\b(?:ignore[rsz]?|oublie[rsz]?|néglige[rsz]?|fais\s+abstraction\s+d)\w*\s+{_W}{{0,3}}?"
        r"(?:instructions?|consignes?|directives?|règles|ordres|prompts?)\s+(?:\w+\s+)?"
        r"(?:précédent|antérieur|ci-dessus|initia|d'origine|du\s+système|système|reçu)"
        r"|\b(?:ignore[rsz]?|oublie[rsz]?)\s+(?:toutes?\s+)?(?:les|tes|vos|ces)\s+(?:instructions"
        r"|consignes|directives|règles)",
        "ignor|oubli|néglig|abstraction",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "fr",
        r"\btu\s+es\s+(?:maintenant|désormais|dorénavant|à\s+présent)\s+(?:une?\s+)?(?:\w+\s+)?"
        r"(?:IA|assistant|modèle|DAN|bot)\w*\s+(?:sans|qui\s+n)"
        r"|\bfais\s+semblant\s+d'être|\bsans\s+(?:aucune\s+)?(?:restrictions?|limites?|filtres?"
        r"|règles)\s+(?:morales|éthiques|d'aucune\s+sorte)",
        "tu es|semblant|sans",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "fr",
        rf"\b(?:envoie|envoyez|envoyer|transmets|transmettez|télécharge|copie|publie|poste)\w*\s+"
        rf"{_W}{{0,6}}?(?:clés?|mots?\s+de\s+passe|secrets?|identifiants|jetons?|tokens?|\.env"
        rf"|variables\s+d'environnement)\s+{_W}{{0,5}}?(?:à|vers|sur|au)\s+{_URL}",
        "envoi|envoy|transmet|télécharg|copie|publie|poste",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "fr",
        r"\b(?:note|message|remarque|consigne)\s+(?:à|pour)\s+(?:l'|la\s+|le\s+|toute\s+)?"
        r"(?:IA|intelligence\s+artificielle|assistant|agent|modèle|LLM)\b"
        r"|\bà\s+l'(?:IA|assistant|agent)\s+qui\s+(?:lit|traite|résume)",
        "ia|intelligence|assistant|agent|modèle|llm",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "fr",
        r"\bne\s+(?:le\s+|rien\s+)?(?:dis|dites|révèle|signale)\s+(?:rien\s+)?à\s+l'utilisateur"
        r"|\bsans\s+(?:prévenir|informer|avertir|demander\s+à)\s+l'utilisateur",
        "utilisateur",
    ),
    # --- Spanish
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "es",
        rf"\b(?:ignora|ignore|ignoren|olvida|olvide|olviden|descarta|omite|pasa\s+por\s+alto)\w*\s+"
        rf"{_W}{{0,3}}?(?:instrucciones|indicaciones|reglas|directrices|órdenes|prompts?)\s+"
        r"(?:\w+\s+)?(?:anteriores|previas|de\s+arriba|iniciales|originales|del\s+sistema|recibidas)"
        r"|\b(?:ignora|olvida)\s+(?:todas\s+)?(?:las|tus|sus)\s+(?:instrucciones|reglas|directrices)",
        "ignor|olvid|descart|omite|alto",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "es",
        r"\b(?:ahora\s+)?eres\s+(?:ahora\s+)?(?:una?\s+)?(?:\w+\s+)?(?:IA|asistente|modelo|DAN|bot)"
        r"\s+(?:sin|que\s+no)|\bfinge\s+(?:ser|que\s+eres)|\bsin\s+(?:ninguna\s+)?(?:restricciones"
        r"|límites|filtros|reglas)\s+(?:éticas|morales|de\s+ningún\s+tipo)",
        "eres|finge|sin",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "es",
        rf"\b(?:envía|envia|envíe|manda|sube|transmite|copia|publica)\w*\s+{_W}{{0,6}}?(?:claves?"
        rf"|contraseñas?|secretos?|credenciales|tokens?|\.env|variables\s+de\s+entorno)\s+{_W}{{0,5}}?"
        rf"(?:a|al|hacia|en)\s+{_URL}",
        "enví|envi|manda|sube|transmit|copia|publica",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "es",
        r"\b(?:nota|mensaje|aviso|instrucción)\s+(?:para|a)\s+(?:la\s+|el\s+|cualquier\s+)?(?:IA"
        r"|inteligencia\s+artificial|asistente|agente|modelo|LLM)\b"
        r"|\ba\s+la\s+IA\s+que\s+(?:lee|procesa|resume)",
        "ia|inteligencia|asistente|agente|modelo|llm",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "es",
        r"\bno\s+(?:le\s+)?(?:digas|informes|avises|cuentes|menciones)\s+(?:nada\s+)?al\s+usuario"
        r"|\bsin\s+(?:avisar|informar|preguntar)\s+al\s+usuario",
        "usuario",
    ),
    # --- Portuguese
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "pt",
        r"\b(?:ignore|ignora|ignorem|esqueça|esqueca|esquece|desconsidere|descarte)\w*\s+"
        r"(?:\w+\s+){0,3}?(?:instruções|instrucoes|orientações|regras|diretrizes|ordens|prompts?)"
        r"\s+(?:\w+\s+)?(?:anteriores|prévias|previas|acima|iniciais|originais|do\s+sistema)",
        "ignor|esque|desconsider|descart",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "pt",
        r"\b(?:agora\s+)?(?:você|voce|tu)\s+(?:é|e|és)\s+(?:agora\s+)?(?:uma?\s+)?(?:\w+\s+)?"
        r"(?:IA|assistente|modelo|DAN|bot)\s+(?:sem|que\s+não)|\bfinja\s+(?:ser|que\s+(?:é|você))"
        r"|\bsem\s+(?:nenhuma\s+)?(?:restrições|restricoes|limites|filtros|regras)\s+(?:éticas"
        r"|morais|de\s+qualquer\s+tipo)",
        "você|voce|tu |finja|sem",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "pt",
        rf"\b(?:envie|envia|mande|manda|suba|transmita|copie|publique)\w*\s+{_W}{{0,6}}?(?:chaves?"
        r"|senhas?|segredos?|credenciais|tokens?|\.env|variáveis\s+de\s+ambiente)\s+"
        rf"{_W}{{0,5}}?(?:para|a|ao|em)\s+{_URL}",
        "envi|mand|suba|transmit|copie|publique",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "pt",
        r"\b(?:nota|mensagem|aviso|recado)\s+(?:para|à|a|ao)\s+(?:a\s+|o\s+|qualquer\s+)?(?:IA"
        r"|inteligência\s+artificial|assistente|agente|modelo|LLM)\b"
        r"|\bà\s+IA\s+que\s+(?:lê|le|processa|resume)",
        "ia|inteligência|assistente|agente|modelo|llm",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "pt",
        r"\bnão\s+(?:conte|diga|avise|informe|mencione)\s+(?:nada\s+)?(?:ao|para\s+o)\s+usuário"
        r"|\bsem\s+(?:avisar|informar|perguntar\s+a)o?\s+usuário",
        "usuário",
    ),
    # --- Italian
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "it",
        r"\b(?:ignora|ignori|ignorate|dimentica|dimentichi|dimenticate|trascura|scarta)\w*\s+"
        r"(?:\w+\s+|\w+'){0,3}?(?:istruzioni|indicazioni|regole|direttive|ordini|prompt)\s+"
        r"(?:\w+\s+)?(?:precedenti|sopra|iniziali|originali|del\s+sistema|di\s+sistema|ricevute)",
        "ignor|dimentic|trascur|scart",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "it",
        r"\b(?:ora\s+)?sei\s+(?:ora\s+)?(?:una?\s+|un'\s*)?(?:\w+\s+)?(?:IA|assistente|modello|DAN"
        r"|bot)\s+(?:senza|che\s+non)|\bfingi\s+di\s+essere|\bsenza\s+(?:alcuna\s+|alcun\s+)?"
        r"(?:restrizion|limit|filtr|regol)\w*\s+(?:etic|moral|di\s+alcun)",
        "sei|fingi|senza",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "it",
        rf"\b(?:invia|manda|carica|trasmetti|copia|pubblica)\w*\s+(?:[\w'’-]+\s+|\w+'){{0,6}}?"
        r"(?:chiavi|chiave|password|segreti|credenziali|token|\.env|variabili\s+d'ambiente)\s+"
        rf"{_W}{{0,5}}?(?:a|al|su|verso)\s+{_URL}",
        "invia|manda|carica|trasmett|copia|pubblica",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "it",
        r"\b(?:nota|messaggio|avviso)\s+(?:per|all'|alla|al)\s*(?:l'|la\s+|qualsiasi\s+)?(?:IA"
        r"|intelligenza\s+artificiale|assistente|agente|modello|LLM)\b"
        r"|\ball'(?:IA|assistente|agente)\s+che\s+(?:legge|elabora|riassume)",
        "ia|intelligenza|assistente|agente|modello|llm",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "it",
        r"\bnon\s+(?:dire|dirlo|informare|avvisare|menzionare)\s+(?:nulla\s+|niente\s+)?"
        r"(?:all'|al\s+)utente|\bsenza\s+(?:avvisare|informare|chiedere\s+al)(?:l'|\s+l')?\s*utente",
        "utente",
    ),
    # --- Russian
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "ru",
        r"(?:игнорир|забудь|забудьте|проигнорир|не\s+обращай\w*\s+внимания\s+на|отбрось|отмени)"
        r"\w*\s+(?:\w+\s+){0,3}?(?:предыдущ|прежн|все|вышеуказанн|вышеизложенн|системн|исходн"
        r"|изначальн|свои|твои)\w*\s+(?:\w+\s+){0,2}?(?:инструкц|указани|правил|директив|команд"
        r"|промпт|настройк)\w*",
        "игнорир|забуд|не обраща|отбрось|отмени",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "ru",
        r"\bты\s+(?:теперь|отныне|больше\s+не)\s+(?:—\s+)?(?:\w+\s+){0,2}?(?:ИИ|ассистент|модель"
        r"|DAN|бот|нейросеть)\w*\s+(?:без|которая\s+не|который\s+не)"
        r"|\b(?:притворись|представь,?\s+что\s+ты)\b[^\n.]{0,60}(?:без\s+ограничений|DAN|свобод)"
        r"|\bбез\s+(?:каких-либо\s+|всяких\s+|любых\s+)?(?:ограничений|фильтров|цензуры)\s+"
        r"(?:отвечай|действуй)",
        "ты |притворись|представь|без",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "ru",
        r"(?:отправь|отправьте|пошли|перешли|загрузи|скопируй|вышли|передай)\w*\s+(?:\w+\s+){0,6}?"
        r"(?:ключ|парол|секрет|токен|учётн|учетн|\.env|переменн)\w*\s+(?:\w+\s+){0,5}?"
        rf"(?:на|в|по)\s+(?:{_URL}|адрес)",
        "отправ|пошли|перешли|загрузи|скопируй|вышли|передай",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "ru",
        r"(?:заметка|сообщение|примечание|записка|указание)\s+(?:для|к)\s+(?:ИИ|ассистент|модел"
        r"|агент|нейросет|LLM)\w*"
        r"|(?:ИИ|модель|ассистент|нейросеть),?\s+(?:который|которая)\s+(?:читает|обрабатывает)",
        "ии|ассистент|модел|агент|нейросет|llm",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "ru",
        r"\bне\s+(?:говори|сообщай|рассказывай|показывай)\s+(?:об\s+этом\s+|ничего\s+)?"
        r"пользовател\w*|\bбез\s+ведома\s+пользовател\w*",
        "пользовател",
    ),
    # --- Chinese (simplified and traditional)
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "zh",
        rf"(?:忽略|忽视|忽視|无视|無視|忘记|忘記|忘掉|不要理会|不要理會|不要遵守|不再遵守|跳过|跳過|放弃|放棄)"
        rf"{_CJK_GAP}{{0,12}}(?:之前|以前|先前|上面|上述|前面|所有|全部|原来|原來|原始|系统|系統|你的)"
        rf"{_CJK_GAP}{{0,8}}(?:指令|指示|说明|說明|提示|规则|規則|命令|指南|设定|設定)",
        "忽|无视|無視|忘|不要|不再|跳|放",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "zh",
        rf"(?:你现在是|你現在是|从现在开始|從現在開始|扮演|假装|假裝|现在你是|現在你是)"
        rf"{_CJK_GAP}{{0,20}}(?:没有|沒有|不受|无|無|不必遵守)"
        rf"{_CJK_GAP}{{0,6}}(?:限制|约束|約束|规则|規則|过滤|過濾|审查|審查)"
        r"|(?:不受任何限制|没有任何限制|沒有任何限制)的?(?:AI|人工智能|助手|模型)",
        "你|从现在|從現在|扮演|假|限制",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "zh",
        rf"(?:发送|發送|上传|上傳|传送|傳送|转发|轉發|发给|發給|发到|發到|寄给|提交)"
        rf"{_CJK_GAP}{{0,20}}(?:密钥|密鑰|密码|密碼|秘密|凭据|憑據|凭证|憑證|令牌|\.env|环境变量|環境變數|私钥|私鑰)"
        rf"|(?:密钥|密鑰|密码|密碼|凭据|憑據|凭证|憑證|令牌|\.env|环境变量|環境變數|私钥|私鑰)"
        rf"{_CJK_GAP}{{0,20}}(?:发送|發送|上传|上傳|传送|傳送|转发|轉發|发|發)(?:到|至|给|給)",
        "发|發|上传|上傳|传送|傳送|转|轉|寄|提交",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "zh",
        rf"(?:给|給|致|写给|寫給|对|對)(?:正在)?{_CJK_GAP}{{0,6}}(?:AI|人工智能|助手|模型|智能体|智能體|代理)"
        r"的?(?:备注|備註|留言|消息|訊息|说明|說明|注意事项|注意事項|提示|指示)"
        r"|(?:正在阅读|正在閱讀|阅读本文|閱讀本文|读到这|讀到這|处理本文|處理本文)"
        rf"{_CJK_GAP}{{0,6}}的?(?:AI|人工智能|助手|模型)",
        "ai|人工智能|助手|模型|智能|代理",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "zh",
        r"(?:不要|别|別|切勿|不得)(?:向|对|對)?(?:告诉|告訴|通知|提醒|透露给|透露給)?(?:用户|用戶|使用者)"
        r"(?:知道|透露|说|說)?",
        "用户|用戶|使用者",
    ),
    # --- Japanese
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "ja",
        rf"(?:以前|前|上記|これまで|すべて|全て|元|システム|最初)の?{_CJK_GAP}{{0,10}}"
        rf"(?:指示|命令|ルール|指令|プロンプト|規則)(?:を|は)?{_CJK_GAP}{{0,10}}"
        r"(?:無視|忘れ|従わな|破棄)",
        "無視|忘れ|従わな|破棄",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "ja",
        rf"(?:あなたは今から|今からあなたは|あなたはもう|これからあなたは|あなたは)"
        rf"{_CJK_GAP}{{0,20}}(?:制限|ルール|フィルター|制約|検閲)(?:の|が)?(?:ない|なし|無し|ありません)"
        r"|(?:制限|制約|フィルター)(?:の|が)?(?:ない|なし|無し)(?:AI|アシスタント|モデル)"
        r"|(?:ふりをして|になりきって)(?:ください)?[^。\n]{0,20}(?:制限|ルール)",
        "あなた|制限|制約|フィルター|ふり|なりき",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "ja",
        rf"(?:鍵|キー|パスワード|秘密|認証情報|トークン|\.env|環境変数|秘密鍵)"
        rf"{_CJK_GAP}{{0,30}}(?:送信|送って|送れ|アップロード|転送|送付|投稿)",
        "送|アップロード|転送|投稿",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "ja",
        r"(?:AI|アシスタント|モデル|エージェント|言語モデル)(?:へ|に)(?:の)?(?:メモ|注意|メッセージ"
        r"|お知らせ|指示|伝言)"
        r"|(?:これ|この文章|この文書)を(?:読んで|処理して|要約して)いる(?:AI|アシスタント|モデル|エージェント)",
        "ai|アシスタント|モデル|エージェント",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "ja",
        r"ユーザー(?:に|には)(?:言わない|伝えない|知らせない|言うな|教えないで|伝えないで|言わないで"
        r"|知らせないで|は?内緒)",
        "ユーザー",
    ),
    # --- Korean
    _rule(
        OVERRIDE,
        IGNORE_PREVIOUS,
        "ko",
        r"(?:이전|이전의|앞의|위의|모든|기존|시스템|원래|처음)\s*[^.\n]{0,10}(?:지시|지침|명령|규칙"
        r"|프롬프트|지시사항)[^.\n]{0,10}(?:무시|잊어|잊고|따르지)",
        "무시|잊어|잊고|따르지",
    ),
    _rule(
        OVERRIDE,
        ROLE_PLAY,
        "ko",
        r"(?:너는|당신은)\s*(?:이제|지금부터)[^.\n]{0,20}(?:제한|규칙|필터|검열)[^.\n]{0,6}없"
        r"|(?:제한|제약|필터)(?:이|가)?\s*없는\s*(?:AI|인공지능|어시스턴트|모델)",
        "너는|당신은|없는",
    ),
    _rule(
        EXFILTRATION,
        SENDS_SECRETS,
        "ko",
        r"(?:키|비밀번호|암호|비밀|자격\s*증명|토큰|\.env|환경\s*변수|개인\s*키)[^.\n]{0,30}"
        r"(?:보내|전송|업로드|전달)",
        "보내|전송|업로드|전달",
    ),
    _rule(
        OVERRIDE,
        NOTE_TO_AI,
        "ko",
        r"(?:AI|인공지능|어시스턴트|모델|에이전트)(?:에게|를\s*위한|한테)\s*(?:보내는\s*)?(?:메모|참고"
        r"|메시지|알림|지시|전하는)"
        r"|이\s*(?:것|글|문서)을\s*(?:읽는|처리하는|요약하는)\s*(?:AI|인공지능|어시스턴트|모델)",
        "ai|인공지능|어시스턴트|모델|에이전트",
    ),
    _rule(
        OVERRIDE,
        KEEPS_USER_DARK,
        "ko",
        r"사용자(?:에게|한테)\s*(?:말하지|알리지|알려주지|이야기하지)\s*(?:마|말)",
        "사용자",
    ),
)
