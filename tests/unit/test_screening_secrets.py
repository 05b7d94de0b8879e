"""Every secret form is masked, also when a zero-width character splits it; the mask keeps
``[masked:<kind>]`` and the text around it."""

from __future__ import annotations

import pytest

from memoryproject.domain.screening import text_mask, value_mask

# Fake but format-valid secrets, built from parts so that no scanner mistakes this file.
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SENDGRID = "SG." + "aaaaBBBBccccDDDDeeee12" + "." + "ffffGGGGhhhhIIIIjjjjKKKKllllMMMMnnnnOOOOppp"
VAULT = "hvs." + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
DIGITALOCEAN = "dop_v1_" + "0123456789abcdef" * 4
GITLAB = "glpat-" + "AbCdEfGhIjKlMnOpQrSt"

FORMS = [
    (
        "zero_width_split",
        f"leaked {GITHUB[:20]}\u200b{GITHUB[20:]} today",
        GITHUB[20:],
        "github_token",
    ),
    (
        "redis_empty_user",
        "REDIS_URL=redis://:s3cretRedis@redis:6379/0",
        "s3cretRedis",
        "password_in_url",
    ),
    ("password_prose", "the password is hunter2 for staging", "hunter2", "password"),
    (
        "password_prose_quoted",
        "root password was set to 'gr33n tea' on the box",
        "gr33n tea",
        "password",
    ),
    ("password_prose_de", "Das Passwort ist Sommer2024! für den Server", "Sommer2024!", "password"),
    ("pw_assignment", "login user=ops pw=Qz7!xLm2", "Qz7!xLm2", "password"),
    ("sendgrid", f"mailer key {SENDGRID}", SENDGRID, "sendgrid_key"),
    ("mysql_p", "mysql -u root -pS3cr3tPass! -h db app", "S3cr3tPass!", "password"),
    ("vault", f"VAULT_TOKEN {VAULT}", VAULT, "vault_token"),
    ("digitalocean", f"DO token {DIGITALOCEAN}", DIGITALOCEAN, "digitalocean_token"),
    (
        "gpg_passphrase_cli",
        "gpg --batch --passphrase 'amber-otter-19' -d s.gpg",
        "amber-otter-19",
        "password",
    ),
    ("gpg_passphrase_prose", "GPG passphrase: correct-horse-42", "correct-horse-42", "password"),
    ("gitlab", f"GITLAB_TOKEN={GITLAB}", GITLAB, "gitlab_token"),
]


@pytest.mark.parametrize(("form", "text", "secret", "kind"), FORMS, ids=[f[0] for f in FORMS])
def test_each_secret_form_is_masked(form, text, secret, kind):
    masked, counts = text_mask(text)
    assert secret not in masked, form
    assert f"[masked:{kind}]" in masked
    assert counts[kind] >= 1


def test_masking_a_split_token_removes_the_invisible_character_with_it():
    masked, _ = text_mask(f"a {GITHUB[:10]}\u200b{GITHUB[10:]} b")
    assert masked == "a [masked:github_token] b"


NOT_SECRETS = [
    "The password is stored in the vault under db/prod.",
    "Password policy: at least 12 characters.",
    "postgres://user:password@localhost/db",
    "pw=${DB_PASSWORD}",
    "mysql -u root -p app (it asks for the password)",
    "Base64 of a sentence: aWdub3JlIGFsbCBwcmV2aW91cyBpbnN0cnVjdGlvbnM=",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_descriptions_and_placeholders_are_not_masked(text):
    assert text_mask(text) == (text, {})


def test_a_passphrase_key_in_metadata_is_masked_whole():
    masked, masks = value_mask({"gpg_passphrase": "blue falcon"}, "metadata")
    assert masked == {"gpg_passphrase": "[masked:password]"}
    assert [m.kind for m in masks] == ["password"]
