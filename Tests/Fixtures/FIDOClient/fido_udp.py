"""Yubico's python-fido2 against `lactl fido serve --udp`: a CTAPHID device whose reports travel over UDP, and the
library's own client and server (Fido2Client, Fido2Server, which verifies attestation, signatures and the RP ID).

    fido_udp.py ADDRESS info
    fido_udp.py ADDRESS register STATE_DIR USER [--resident] [--uv] [--pin PIN] [--hmac] [--protect 1|2|3]
                                                [--cancel-on-prompt LOG]
    fido_udp.py ADDRESS authenticate STATE_DIR [--discoverable] [--uv] [--pin PIN] [--salt HEX]
    fido_udp.py ADDRESS pin-set PIN [--protocol 1|2]
    fido_udp.py ADDRESS pin-change OLD NEW [--protocol 1|2]
    fido_udp.py ADDRESS pin-token PIN [--protocol 1|2]
    fido_udp.py ADDRESS pin-retries
    fido_udp.py ADDRESS token-twice STATE_DIR PIN
    fido_udp.py ADDRESS creds PIN [--bound RP_ID]
    fido_udp.py ADDRESS cred-delete PIN HEX_ID [--bound RP_ID]
    fido_udp.py ADDRESS cred-rename PIN HEX_ID NAME
    fido_udp.py ADDRESS cred-probe PIN BOUND_RP OTHER_RP HEX_ID
    fido_udp.py ADDRESS u2f-register STATE_DIR [--app APP_ID]
    fido_udp.py ADDRESS u2f-authenticate STATE_DIR [--app APP_ID] [--check] [--ctap2] [--via-ctap2]
    fido_udp.py ADDRESS u2f-dummy
    fido_udp.py ADDRESS u2f-either STATE_DIR STATE_DIR
    fido_udp.py @LOG reset

Prints one JSON object; the exit status is 0 when the library accepted every step. STATE_DIR keeps the registered
credentials between runs (credentials.json), as a relying party's database would. With --pin, the client verifies
the user by the PIN instead of the authenticator's built-in verification. `@LOG` waits for the authenticator to
print its address in LOG and then speaks at once (a reset is taken only within 10 s of the start). With
--cancel-on-prompt, the client cancels the registration (CTAPHID_CANCEL) once LOG shows the authenticator's prompt. `--rp ID`, before
the command, names another relying party than example.test. The `creds` commands manage passkeys through the
library's CredentialManagement with a PIN token (with --bound, a token for credential management of one relying
party only, asked for with getPinUvAuthTokenUsingPinWithPermissions). The `u2f` commands speak CTAP1 through the
library's `Ctap1`, asking again while the authenticator answers "conditions not satisfied" (0x6985), as U2F clients
do until the user was there; the library verifies each signature (and --check asks only whether the key handle is
known; --ctap2 uses the first credential registered with CTAP2 in STATE_DIR, under its RP ID's hash; --via-ctap2
signs with the U2F key handle through CTAP2's GetAssertion, the AppID as the RP ID, as the `appid` extension does).
`u2f-dummy` is the registration clients send only to collect a touch (application and challenge alike);
`u2f-either` polls two key handles in turn, as authenticator-rs does, until one signs. `cred-probe` tries, with a
token bound to BOUND_RP, what such a token may not do, and prints each status."""
import dataclasses
import hashlib
import json
import os
import socket
import sys
import time

from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.cose import CoseKey
from fido2.ctap import CtapError
from fido2.ctap1 import APDU, ApduError, Ctap1
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.extensions import CredProtectExtension, HmacSecretExtension
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.hid import CtapHidDevice
from fido2.hid.base import CtapHidConnection, HidDescriptor
from fido2.server import Fido2Server
from fido2.webauthn import (
    AttestedCredentialData,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

ORIGIN = "https://example.test"
RP = PublicKeyCredentialRpEntity(id="example.test", name="Example")


def use_relying_party(rp_id):
    global ORIGIN, RP
    ORIGIN = f"https://{rp_id}"
    RP = PublicKeyCredentialRpEntity(id=rp_id, name=rp_id.split(".")[0].title())


class UdpConnection(CtapHidConnection):
    """One 64-byte report per datagram, to and from the authenticator's address."""

    def __init__(self, host, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect((host, port))
        self.sock.settimeout(180)

    def write_packet(self, data):
        self.sock.send(bytes(data))

    def read_packet(self):
        return self.sock.recv(64)

    def close(self):
        self.sock.close()


def open_device(address):
    host, port = address.rsplit(":", 1)
    descriptor = HidDescriptor(address, 0x1209, 0x4C41, 64, 64, "lactl fido", None)
    return CtapHidDevice(descriptor, UdpConnection(host, int(port)))


class PinInteraction(UserInteraction):
    """A user who types the PIN and declines the authenticator's own verification."""

    def __init__(self, pin):
        self.pin = pin

    def request_uv(self, permissions, rp_id):
        return False

    def request_pin(self, permissions, rp_id):
        return self.pin


def wait_for_address(log):
    while True:
        if os.path.exists(log):
            with open(log) as file:
                for line in file:
                    if line.startswith("FIDO_UDP="):
                        return line.strip().split("=", 1)[1]
        time.sleep(0.01)


def client_pin(device, flags):
    protocol = None
    if "--protocol" in flags:
        protocol = {"1": PinProtocolV1, "2": PinProtocolV2}[flags[flags.index("--protocol") + 1]]()
    return ClientPin(Ctap2(device), protocol)


def hmac_output(response):
    """hmac-secret's first output, in hexadecimal; None when there is none."""
    results = response.client_extension_results or {}
    output = results.get("hmacGetSecret")
    if output is None:
        return None
    first = output.get("output1") if isinstance(output, dict) else getattr(output, "output1", None)
    if isinstance(first, str):  # base64url in the JSON form
        import base64
        first = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4))
    return first.hex() if first else None


def credential_management(device, pin, bound=None):
    """The library's CredentialManagement with a token from the PIN: getPinToken's, or with `bound` one asked for
    the `cm` permission and that relying party (the library asks for permissions only of FIDO_2_1 authenticators,
    so that request is made by hand)."""
    ctap = Ctap2(device)
    client = ClientPin(ctap)
    if bound is None:
        token = client.get_pin_token(pin)
    else:
        key_agreement, shared_secret = client._get_shared_secret()
        pin_hash = client.protocol.encrypt(shared_secret, hashlib.sha256(pin.encode()).digest()[:16])
        answer = ctap.client_pin(client.protocol.VERSION, ClientPin.CMD.GET_TOKEN_USING_PIN,
                                 key_agreement=key_agreement, pin_hash_enc=pin_hash,
                                 permissions=ClientPin.PERMISSION.CREDENTIAL_MGMT, permissions_rpid=bound)
        token = client.protocol.decrypt(shared_secret, answer[ClientPin.RESULT.PIN_UV_TOKEN])
    return CredentialManagement(ctap, client.protocol, token)


def list_credentials(manager, bound=None):
    """Every relying party's passkeys (only `bound`'s with a bound token, which may not list the parties)."""
    R = CredentialManagement.RESULT
    listed = {}
    if bound is None:
        metadata = manager.get_metadata()
        listed["existing"] = metadata[R.EXISTING_CRED_COUNT]
        listed["remaining"] = metadata[R.MAX_REMAINING_COUNT]
        parties = [(rp[R.RP]["id"], rp[R.RP].get("name"), rp[R.RP_ID_HASH]) for rp in manager.enumerate_rps()]
    else:
        parties = [(bound, None, hashlib.sha256(bound.encode()).digest())]
    listed["rps"] = []
    for rp_id, name, rp_hash in parties:
        credentials = [{"id": bytes(item[R.CREDENTIAL_ID]["id"]).hex(), "user": item[R.USER].get("name"),
                        "display": item[R.USER].get("displayName"), "protect": item.get(R.CRED_PROTECT),
                        "key_alg": item[R.PUBLIC_KEY][3]}
                       for item in manager.enumerate_creds(rp_hash)]
        listed["rps"].append({"id": rp_id, "name": name, "credentials": credentials})
    return listed


def poll(call, *args, **kwargs):
    """`call` asked again every 100 ms while the authenticator waits for the user (0x6985), for 170 s at most."""
    deadline = time.time() + 170
    while True:
        try:
            return call(*args, **kwargs)
        except ApduError as error:
            if error.code != APDU.USE_NOT_SATISFIED or time.time() > deadline:
                raise
            time.sleep(0.1)


def u2f(device, command, state_dir, flags):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    ctap1 = Ctap1(device)
    app_id = flags[flags.index("--app") + 1] if "--app" in flags else "https://u2f.example.test"
    app_param = hashlib.sha256(app_id.encode()).digest()
    client_param = os.urandom(32)
    path = os.path.join(state_dir, "u2f.json")
    if command == "u2f-register":
        registration = poll(ctap1.register, client_param, app_param)
        registration.verify(app_param, client_param)
        certificate = x509.load_der_x509_certificate(registration.certificate)
        certificate.public_key().verify(certificate.signature, certificate.tbs_certificate_bytes,
                                        ec.ECDSA(certificate.signature_hash_algorithm))
        with open(path, "w") as file:
            json.dump({"key_handle": registration.key_handle.hex(), "public_key": registration.public_key.hex()}, file)
        return {"key_handle": registration.key_handle.hex(), "version": ctap1.get_version(),
                "subject": certificate.subject.rfc4514_string()}
    if "--ctap2" in flags:
        credential = load(state_dir)[0]
        app_param = hashlib.sha256(RP.id.encode()).digest()
        key_handle = bytes(credential.credential_id)
        public_key = credential.public_key
    else:
        with open(path) as file:
            saved = json.load(file)
        key_handle = bytes.fromhex(saved["key_handle"])
        public_key = CoseKey.for_alg(-7).from_ctap1(bytes.fromhex(saved["public_key"]))
    if "--via-ctap2" in flags:
        assertion = Ctap2(device).get_assertion(app_id, client_param, [{"type": "public-key", "id": key_handle}])
        public_key.verify(bytes(assertion.auth_data) + client_param, assertion.signature)
        return {"counter": assertion.auth_data.counter,
                "rp_id_hash_is_app": bytes(assertion.auth_data.rp_id_hash) == app_param}
    if "--check" in flags:
        try:
            ctap1.authenticate(client_param, app_param, key_handle, check_only=True)
        except ApduError as error:
            return {"check": hex(error.code)}
        return {"check": "signed without the user"}
    signature = poll(ctap1.authenticate, client_param, app_param, key_handle)
    public_key.verify(app_param + bytes(signature)[:5] + client_param, signature.signature)
    return {"counter": signature.counter, "user_presence": signature.user_presence}


def cancel_on_prompt(log):
    """An event the library watches to cancel a request, set once `log` shows the registration's prompt."""
    import threading
    event = threading.Event()

    def watch():
        while not event.is_set():
            if os.path.exists(log):
                with open(log) as file:
                    if "wants to make a passkey" in file.read():
                        event.set()
                        return
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    return event


def load(state_dir):
    path = os.path.join(state_dir, "credentials.json")
    if not os.path.exists(path):
        return []
    with open(path) as file:
        return [AttestedCredentialData(bytes.fromhex(item)) for item in json.load(file)]


def save(state_dir, credentials):
    with open(os.path.join(state_dir, "credentials.json"), "w") as file:
        json.dump([bytes(item).hex() for item in credentials], file)


def main():
    arguments = sys.argv[1:]
    if "--rp" in arguments:
        at = arguments.index("--rp")
        use_relying_party(arguments[at + 1])
        del arguments[at:at + 2]
    address, command = arguments[0], arguments[1]
    if address.startswith("@"):
        address = wait_for_address(address[1:])
    device = open_device(address)
    flags = arguments[2:]
    bound = flags[flags.index("--bound") + 1] if "--bound" in flags else None
    if command == "info":
        info = Ctap2(device).get_info()
        print(json.dumps({"versions": info.versions, "aaguid": bytes(info.aaguid).hex(), "options": info.options,
                          "extensions": info.extensions,
                          "algorithms": info.algorithms, "capabilities": device.capabilities,
                          "pin_protocols": info.pin_uv_protocols, "min_pin_length": info.min_pin_length}))
        return
    if command == "pin-set":
        client_pin(device, flags).set_pin(flags[0])
        print(json.dumps({"ok": True}))
        return
    if command == "pin-change":
        client_pin(device, flags).change_pin(flags[0], flags[1])
        print(json.dumps({"ok": True}))
        return
    if command == "pin-token":
        token = client_pin(device, flags).get_pin_token(flags[0])
        print(json.dumps({"ok": True, "token_length": len(token)}))
        return
    if command == "pin-retries":
        print(json.dumps({"retries": client_pin(device, flags).get_pin_retries()[0]}))
        return
    if command == "token-twice":
        # One PIN token, two assertions with it: the first verified, the second refused.
        state_dir, pin = flags[0], flags[1]
        ctap = Ctap2(device)
        client = ClientPin(ctap)
        token = client.get_pin_token(pin)
        allow = [{"type": "public-key", "id": bytes(item.credential_id)} for item in load(state_dir)]
        answers = []
        for _ in range(2):
            client_data_hash = os.urandom(32)
            try:
                assertion = ctap.get_assertion(RP.id, client_data_hash, allow,
                                               pin_uv_param=client.protocol.authenticate(token, client_data_hash),
                                               pin_uv_protocol=client.protocol.VERSION)
                answers.append({"flags": assertion.auth_data.flags})
            except CtapError as error:
                answers.append({"error": error.code.name})
        print(json.dumps({"answers": answers}))
        return
    if command == "creds":
        print(json.dumps(list_credentials(credential_management(device, flags[0], bound), bound)))
        return
    if command == "cred-delete":
        manager = credential_management(device, flags[0], bound)
        manager.delete_cred({"type": "public-key", "id": bytes.fromhex(flags[1])})
        print(json.dumps({"ok": True}))
        return
    if command == "cred-rename":
        # updateUserInformation keeps the user handle and replaces the names. The library offers it only to FIDO_2_1
        # authenticators, so the subcommand is sent through its own call.
        manager = credential_management(device, flags[0])
        R = CredentialManagement.RESULT
        user = next(item[R.USER] for rp in manager.enumerate_rps()
                    for item in manager.enumerate_creds(rp[R.RP_ID_HASH])
                    if bytes(item[R.CREDENTIAL_ID]["id"]).hex() == flags[1])
        manager._call(CredentialManagement.CMD.UPDATE_USER_INFO, {
            CredentialManagement.PARAM.CREDENTIAL_ID: {"type": "public-key", "id": bytes.fromhex(flags[1])},
            CredentialManagement.PARAM.USER: {"id": user["id"], "name": flags[2], "displayName": flags[2].title()}})
        print(json.dumps({"ok": True}))
        return
    if command == "u2f-dummy":
        dummy = b"\0" * 32
        registration = poll(Ctap1(device).register, dummy, dummy)
        registration.verify(dummy, dummy)
        print(json.dumps({"ok": True}))
        return
    if command == "u2f-either":
        ctap1 = Ctap1(device)
        app_param = hashlib.sha256(b"https://u2f.example.test").digest()
        client_param = os.urandom(32)
        handles = []
        for state_dir in flags[:2]:
            with open(os.path.join(state_dir, "u2f.json")) as file:
                handles.append(bytes.fromhex(json.load(file)["key_handle"]))
        deadline = time.time() + 170
        while True:
            for handle in handles:
                try:
                    signature = ctap1.authenticate(client_param, app_param, handle)
                    print(json.dumps({"signed_by": handle.hex(), "counter": signature.counter}))
                    return
                except ApduError as error:
                    if error.code != APDU.USE_NOT_SATISFIED or time.time() > deadline:
                        raise
            time.sleep(0.1)
    if command == "cred-probe":
        # A token bound to one relying party: none of these may pass.
        manager = credential_management(device, flags[0], flags[1])
        other_hash = hashlib.sha256(flags[2].encode()).digest()
        outcomes = {}
        for name, call in [
            ("metadata", manager.get_metadata), ("rps", manager.enumerate_rps_begin),
            ("other_creds", lambda: manager.enumerate_creds_begin(other_hash)),
            ("rename_other", lambda: manager._call(CredentialManagement.CMD.UPDATE_USER_INFO, {
                CredentialManagement.PARAM.CREDENTIAL_ID: {"type": "public-key", "id": bytes.fromhex(flags[3])},
                CredentialManagement.PARAM.USER: {"id": b"x", "name": "mallory"}})),
        ]:
            try:
                call()
                outcomes[name] = "allowed"
            except CtapError as error:
                outcomes[name] = error.code.name
        print(json.dumps(outcomes))
        return
    if command.startswith("u2f-"):
        print(json.dumps(u2f(device, command, flags[0], flags[1:])))
        return
    if command == "reset":
        Ctap2(device).reset()
        print(json.dumps({"ok": True}))
        return
    state_dir = flags[0]
    flags = flags[1:]
    uv = UserVerificationRequirement.REQUIRED if "--uv" in flags else UserVerificationRequirement.DISCOURAGED
    interaction = PinInteraction(flags[flags.index("--pin") + 1]) if "--pin" in flags else UserInteraction()
    client = Fido2Client(device, DefaultClientDataCollector(ORIGIN), interaction,
                         extensions=[HmacSecretExtension(allow_hmac_secret=True), CredProtectExtension()])
    server = Fido2Server(RP)
    credentials = load(state_dir)
    if command == "register":
        user = PublicKeyCredentialUserEntity(id=flags[0].encode(), name=flags[0], display_name=flags[0].title())
        resident = ResidentKeyRequirement.REQUIRED if "--resident" in flags else ResidentKeyRequirement.DISCOURAGED
        options, state = server.register_begin(user, credentials, resident_key_requirement=resident,
                                               user_verification=uv)
        public_key = options.public_key
        extensions = {}
        if "--hmac" in flags:
            extensions["hmacCreateSecret"] = True
        if "--protect" in flags:
            policy = list(CredProtectExtension.POLICY)[int(flags[flags.index("--protect") + 1]) - 1]
            extensions["credentialProtectionPolicy"] = policy.value
            extensions["enforceCredentialProtectionPolicy"] = True
        if extensions:
            public_key = dataclasses.replace(public_key, extensions=extensions)
        event = None
        if "--cancel-on-prompt" in flags:
            event = cancel_on_prompt(flags[flags.index("--cancel-on-prompt") + 1])
        response = client.make_credential(public_key, event=event)
        auth_data = server.register_complete(state, response)
        credentials.append(auth_data.credential_data)
        save(state_dir, credentials)
        print(json.dumps({"registered": bytes(auth_data.credential_data.credential_id).hex(),
                          "flags": auth_data.flags, "fmt": response.response.attestation_object.fmt,
                          "hmac": bool((response.client_extension_results or {}).get("hmacCreateSecret")),
                          "protect": (auth_data.extensions or {}).get("credProtect")}))
    elif command == "authenticate":
        options, state = server.authenticate_begin(None if "--discoverable" in flags else credentials,
                                                   user_verification=uv)
        public_key = options.public_key
        if "--salt" in flags:
            salt = bytes.fromhex(flags[flags.index("--salt") + 1])
            public_key = dataclasses.replace(public_key, extensions={"hmacGetSecret": {"salt1": salt}})
        selection = client.get_assertion(public_key)
        response = selection.get_response(0)
        matched = server.authenticate_complete(state, credentials, response)
        auth_data = response.response.authenticator_data
        print(json.dumps({"authenticated": bytes(matched.credential_id).hex(), "counter": auth_data.counter,
                          "flags": auth_data.flags, "user": response.response.user_handle.decode()
                          if response.response.user_handle else None, "hmac": hmac_output(response)}))


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # the test prints what the library refused
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        sys.exit(1)
