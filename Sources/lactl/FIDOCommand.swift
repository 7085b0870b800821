import ArgumentParser
import FIDOAuthenticator
import Foundation
import LocalAuthentication
import SSHAgent

/// `lactl fido …`: a FIDO2 authenticator (passkeys) whose credentials are persisted rights.
struct FIDOCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fido",
        abstract: "A FIDO2 authenticator (passkeys) whose keys are held by the enclave behind your fingerprint.",
        subcommands: [ServeFIDO.self, ListFIDO.self, DeleteFIDO.self])
}

struct ServeFIDO: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve CTAP 2.1 over CTAPHID until stopped.",
        discussion: """
            --uhid makes a USB security key through /dev/uhid that browsers and libfido2 see on /dev/hidraw* (it \
            needs write access to /dev/uhid: README, "Passkeys"); the device goes when the program ends. \
            --udp HOST:PORT carries one 64-byte CTAPHID report per datagram and answers the sender (for test tools \
            such as python-fido2; no kernel device is needed). It listens on loopback only, and any program of any \
            user of the machine can send it requests: it is a transport for tests. Each registration and sign-in \
            asks for the finger, naming the site, and writes one line on standard error.
            """)

    @Flag(help: "Serve a HID security key made through /dev/uhid.")
    var uhid = false

    @Option(help: "Serve CTAPHID reports over UDP on HOST:PORT (port 0: any free port, printed on standard output).")
    var udp: String?

    @Option(help: "How many passkeys (discoverable credentials) to keep before refusing new ones (key store full).")
    var maxPasskeys = FIDOAuthenticator.defaultMaximumDiscoverable

    func validate() throws {
        guard uhid != (udp != nil) else { throw ValidationError("give one of --uhid and --udp HOST:PORT") }
    }

    func run() async throws {
        guard maxPasskeys >= 0 else { throw ValidationError("--max-passkeys takes a count (0 or more)") }
        let authenticator = FIDOAuthenticator(maximumDiscoverable: maxPasskeys) { right, reason in
            // The finger only, the prompt on standard error: a browser has no terminal to read a passcode from.
            right.presenter = AgentNoticePresenter(program: "lactl fido")
            do {
                try await right.authorize(localizedReason: reason)
            } catch {
                FileHandle.standardError.write(Data("lactl fido: not approved: \(error.localizedDescription)\n".utf8))
                throw error
            }
        }
        guard let udp else {
            let transport = try await sshReporting { try FIDOUHIDTransport(authenticator: authenticator) }
            FileHandle.standardOutput.write(Data("FIDO_UHID=lactl fido\n".utf8))
            return try await transport.run()
        }
        guard let colon = udp.lastIndex(of: ":"), let port = Int(udp[udp.index(after: colon)...]),
            (0...65535).contains(port)
        else { throw ValidationError("--udp takes HOST:PORT") }
        let host = String(udp[..<colon])
        // UDP says nothing of who sent a datagram: loopback only, and even there any program of any user of this
        // machine can ask (a transport for tests; the uhid device is for people).
        guard ["127.0.0.1", "::1", "localhost"].contains(host) else {
            throw ValidationError("--udp listens on loopback only (127.0.0.1 or ::1): UDP carries no sender's identity")
        }
        let transport = try await FIDOUDPTransport(host: host, port: port, authenticator: authenticator)
        FileHandle.standardOutput.write(Data("FIDO_UDP=\(host):\(transport.port)\n".utf8))
        try await transport.run()
    }
}

struct ListFIDO: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the FIDO credentials: ID, site, user, kind, signatures.")

    func run() async throws {
        let credentials = try await sshReporting { try await FIDOCredentials().credentials() }
        if credentials.isEmpty { print("No FIDO credentials.") }
        for credential in credentials {
            let kind =
                (credential.discoverable ? "passkey" : "server-side")
                + (credential.madeWithUserVerification ? ", fingers enrolled at creation" : "")
            let user = credential.userName ?? credential.userDisplayName ?? "-"
            print("\(credential.hexID)\t\(credential.relyingParty)\t\(user)\t\(kind)\t\(credential.signatureCount)")
        }
    }
}

struct DeleteFIDO: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a FIDO credential for good (its key goes with it).")

    @Argument(help: "The credential's ID, in hexadecimal as `lactl fido list` shows it.") var id: String

    func run() async throws {
        try await sshReporting { try await FIDOCredentials().delete(hexID: id.lowercased()) }
        print("Deleted FIDO credential \(id.lowercased()).")
    }
}
