"""A person's proofs, kept outside every project folder: the terminal's person key, the confirmed project cap and
the passkeys of each project (`home`, `records`), and WebAuthn assertions bound to one act (`passkeys`)."""

from aqven.people.home import PersonKey, person_dir, person_key, refuse_unsafe, unsafe_for
from aqven.people.passkeys import ACTIONS, Binding, PasskeyRefused, proof_of, reverify, verify_assertion
from aqven.people.records import ConfirmedCap, Passkey, ProjectRecord, load, updating

__all__ = [
    "ACTIONS",
    "Binding",
    "ConfirmedCap",
    "Passkey",
    "PasskeyRefused",
    "PersonKey",
    "ProjectRecord",
    "load",
    "person_dir",
    "person_key",
    "proof_of",
    "refuse_unsafe",
    "reverify",
    "unsafe_for",
    "updating",
    "verify_assertion",
]
