"""Yubico's python-fido2 against `lactl fido serve --udp`: a CTAPHID device whose reports travel over UDP, and the
library's own client and server (Fido2Client, Fido2Server, which verifies attestation, signatures and the RP ID).

    fido_udp.py ADDRESS info
    fido_udp.py ADDRESS register STATE_DIR USER [--resident] [--uv]
    fido_udp.py ADDRESS authenticate STATE_DIR [--discoverable] [--uv]

Prints one JSON object; the exit status is 0 when the library accepted every step. STATE_DIR keeps the registered
credentials between runs (credentials.json), as a relying party's database would."""
import json
import os
import socket
import sys

from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.ctap2 import Ctap2
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
    address, command = sys.argv[1], sys.argv[2]
    device = open_device(address)
    if command == "info":
        info = Ctap2(device).get_info()
        print(json.dumps({"versions": info.versions, "aaguid": bytes(info.aaguid).hex(), "options": info.options,
                          "algorithms": info.algorithms, "capabilities": device.capabilities}))
        return
    state_dir = sys.argv[3]
    flags = sys.argv[4:]
    uv = UserVerificationRequirement.REQUIRED if "--uv" in flags else UserVerificationRequirement.DISCOURAGED
    client = Fido2Client(device, DefaultClientDataCollector(ORIGIN), UserInteraction())
    server = Fido2Server(RP)
    credentials = load(state_dir)
    if command == "register":
        user = PublicKeyCredentialUserEntity(id=flags[0].encode(), name=flags[0], display_name=flags[0].title())
        resident = ResidentKeyRequirement.REQUIRED if "--resident" in flags else ResidentKeyRequirement.DISCOURAGED
        options, state = server.register_begin(user, credentials, resident_key_requirement=resident,
                                               user_verification=uv)
        response = client.make_credential(options.public_key)
        auth_data = server.register_complete(state, response)
        credentials.append(auth_data.credential_data)
        save(state_dir, credentials)
        print(json.dumps({"registered": bytes(auth_data.credential_data.credential_id).hex(),
                          "flags": auth_data.flags, "fmt": response.response.attestation_object.fmt}))
    elif command == "authenticate":
        options, state = server.authenticate_begin(None if "--discoverable" in flags else credentials,
                                                   user_verification=uv)
        selection = client.get_assertion(options.public_key)
        response = selection.get_response(0)
        matched = server.authenticate_complete(state, credentials, response)
        auth_data = response.response.authenticator_data
        print(json.dumps({"authenticated": bytes(matched.credential_id).hex(), "counter": auth_data.counter,
                          "flags": auth_data.flags, "user": response.response.user_handle.decode()
                          if response.response.user_handle else None}))


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # the test prints what the library refused
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        sys.exit(1)
