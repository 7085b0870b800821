import ArgumentParser
import Authenticators
import Foundation
import SecurityClient
import SecurityProtocol
import SecurityServer
import StoreFiles

/// `lactl passcode …`: the passcode through PAM.
struct Passcode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the passcode (the user's PAM password).",
        subcommands: [PasscodeVerify.self])
}

/// `lactl passcode verify`: asks for the passcode on the terminal and checks it through PAM.
struct PasscodeVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Ask for the passcode on /dev/tty (echo off) and check it through PAM.",
        discussion: """
            Uses the PAM service 'local-authentication' by default; install Resources/pam.d/local-authentication \
            as /etc/pam.d/local-authentication first. Failed attempts are counted in the state directory and \
            escalate waits (5 -> 1 min, 6 -> 5 min, 7-8 -> 15 min, 9+ -> 1 h).
            """)

    @Option(help: "The user whose passcode is checked (default: the current user).")
    var user: String?

    @Option(help: "The PAM service name.")
    var service = "local-authentication"

    @Option(help: "A directory holding the PAM service file, instead of /etc/pam.d (pam_start_confdir).")
    var confdir: String?

    @Option(help: "Where the attempt counters live (default: $XDG_DATA_HOME/local-authentication).")
    var stateDir: String?

    /// The engine to ask: the configured daemon's (its PAM service, its counters; the options do not apply), else
    /// an embedded one on the store, so these attempts count with every other program's.
    func client(user: String) throws -> any SecurityClient {
        if case .daemon = ClientSelection.mode() {
            guard self.user == nil, confdir == nil, stateDir == nil, service == "local-authentication" else {
                throw ValidationError("--user, --service, --confdir and --state-dir do not apply: the configured daemon checks")
            }
            return try ClientSelection.fromEnvironment()
        }
        let directory = URL(fileURLWithPath: stateDir ?? defaultAuthenticatorStateDirectory(), isDirectory: true)
        return try EmbeddedClient(
            configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: []),
            authentication: AuthenticationConfiguration(
                stateDirectory: directory.path, username: user,
                passcode: .init(service: service, configurationDirectory: confdir)))
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
