import ArgumentParser
import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import SecurityClient
import SecurityProtocol
import StoreFiles
import WorkThreads

/// `lactl passcode …`: the passcode through PAM.
struct Passcode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the passcode (the user's PAM password).",
        subcommands: [PasscodeVerify.self, PasscodeChanged.self])
}

/// `lactl passcode verify`: asks for the passcode on the terminal and checks it through PAM.
struct PasscodeVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Ask for the passcode on /dev/tty (echo off) and check it through PAM.",
        discussion: """
            Uses the PAM service $LA_PAM_SERVICE, else 'local-authentication' (install \
            Resources/pam.d/local-authentication as /etc/pam.d/local-authentication first), from the directory \
            $LA_PAM_CONFDIR, else /etc/pam.d, as every other command does. Failed attempts are counted in the state directory and \
            escalate waits (5 -> 1 min, 6 -> 5 min, 7-8 -> 15 min, 9+ -> 1 h).
            """)

    @Option(help: "The user whose passcode is checked (default: the current user).")
    var user: String?

    @Option(help: "The PAM service name (default: $LA_PAM_SERVICE, else local-authentication).")
    var service: String?

    @Option(help: "A directory holding the PAM service file (default: $LA_PAM_CONFDIR, else /etc/pam.d).")
    var confdir: String?

    @Option(help: "Where the attempt counters live (default: $XDG_DATA_HOME/local-authentication).")
    var stateDir: String?

    /// The engine to ask: the configured daemon's (its PAM service, its counters; the options do not apply), else
    /// an embedded one on the store, so these attempts count with every other program's.
    func client(user: String) throws -> any SecurityClient {
        if case .daemon = ClientSelection.mode() {
            guard self.user == nil, confdir == nil, stateDir == nil, service == nil else {
                throw ValidationError(
                    "--user, --service, --confdir and --state-dir do not apply: the configured daemon checks")
            }
            return try ClientSelection.fromEnvironment()
        }
        let directory = URL(fileURLWithPath: stateDir ?? defaultAuthenticatorStateDirectory(), isDirectory: true)
        // The environment's PAM service and directory, as `lactl status` reports them; the options override them.
        var authentication = AuthenticationConfiguration.fromEnvironment(dataDirectory: directory, username: user)
        if let service { authentication.passcode.service = service }
        if let confdir { authentication.passcode.configurationDirectory = confdir }
        return try EmbeddedClient(
            configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: []),
            authentication: authentication)
    }

    func run() async throws {
        let user = try user ?? currentUserName()
        let client = try client(user: user)
        do {
            guard case .context(let id) = try await client.send(.createContext) else { return }
            let options = EvaluationOptions(prompt: EvaluationPrompt(reason: ""))
            _ = try await client.send(.evaluatePolicy(.passcode, id, options), presenter: TerminalPresenter())
            print("passcode accepted for \(user)")
        } catch let error as AuthenticationError {
            printError(error)
            throw ExitCode(1)
        }
    }
}

/// `lactl passcode changed`: after the account's passcode was changed (with `passwd`), re-seals the keychain's
/// passcode classes under the new one, asking once for the previous one.
struct PasscodeChanged: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "changed",
        abstract: "Re-seal the keychain under the account's new passcode (after passwd).",
        discussion: """
            Asks for the current passcode on /dev/tty and checks it through PAM (as 'lactl keychain unlock' does). \
            When the keychain was sealed under another passcode, asks once for the previous one and re-seals it \
            under the current one. The first unlock after a change does the same on its own; this does it on demand. \
            When PAM says the account can no longer authenticate (unknown, expired or refused), the keychain's \
            WhenPasscodeSetThisDeviceOnly items and their class key are destroyed, as Apple does when the passcode \
            is removed, and the command fails.
            """)

    @OptionGroup var options: KeychainOptions

    func run() throws {
        try reporting {
            let client = try options.client()
            // The account check first: an account that can no longer authenticate loses its akpu items here.
            let availability = try BlockingBridge.wait { () async throws -> PolicyAvailability? in
                guard case .context(let id) = try await client.send(.createContext) else { return nil }
                let answer = try await client.send(.canEvaluatePolicy(.passcode, id))
                _ = try? await client.send(.discard(id))
                guard case .availability(let availability) = answer else { return nil }
                return availability
            }
            if let error = availability?.error {
                printError(error)
                throw KeychainCommandFailure(
                    status: KeychainStatus.Code(authenticationCode: error.code).rawValue,
                    operation: "re-seal the keychain (the passcode cannot be used)")
            }
            try unlockWithPasscode(
                client, reason: "Re-seal the keychain under your passcode", operation: "re-seal the keychain")
            print("the keychain is sealed under the current passcode")
        }
    }
}

/// The name of the user running the command. - Throws: when the uid has no passwd entry.
func currentUserName() throws -> String {
    guard let name = DataLocations.currentUserName() else {
        throw ValidationError("the current uid \(geteuid()) has no user name; pass --user")
    }
    return name
}

/// Prints an authentication error for people: its message, its LAError code, and any wait.
func printError(_ error: AuthenticationError) {
    var text = "lactl: \(error.message) (\(error.code), LAError \(error.code.rawValue))"
    if let wait = error.retryAfter { text += "; retry after \(wait.components.seconds) s" }
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
