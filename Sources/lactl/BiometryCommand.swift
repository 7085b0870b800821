import ArgumentParser
import Authenticators
import EmbeddedEngine
import Foundation
import SecurityClient
import SecurityProtocol

/// `lactl biometry …`: enrolled fingerprints through the engine's requests (the reader through libfprint or fprintd).
struct Biometry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enroll, list, remove and verify fingerprints.",
        subcommands: [BiometryEnroll.self, BiometryList.self, BiometryRemove.self, BiometryVerify.self])
}

/// Options shared by the `biometry` subcommands.
struct BiometryOptions: ParsableArguments {
    @Option(help: "Where prints and attempt counters live (default: $XDG_DATA_HOME/local-authentication).")
    var stateDir: String?

    @Option(help: "The user the prints belong to (default: the current user).")
    var user: String?

    @Option(
        name: .customLong("driver"),
        help: "An acceptable libfprint driver id, most preferred first (repeatable; default: any reader).")
    var drivers: [String] = []

    @Option(help: "Seconds to wait for each scan.")
    var timeout: Int = 30

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    /// A client of the engine on the store: the same prints, attempt counters and lockout every program of the
    /// user sees. Enrollment and removal go through its requests, under the passcode, like any other program's.
    ///
    /// With a daemon configured (`LA_DAEMON_SOCKET`, `client.conf`) the daemon's client: the daemon owns the reader,
    /// the prints and the counters, so `--state-dir`, `--user` and `--driver` do not apply.
    func client() throws -> any SecurityClient {
        if case .daemon = ClientSelection.mode() {
            guard stateDir == nil, user == nil, drivers.isEmpty else {
                throw ValidationError(
                    "--state-dir, --user and --driver do not apply: the configured daemon owns the reader")
            }
            return try ClientSelection.fromEnvironment()
        }
        let directory = URL(fileURLWithPath: stateDir ?? defaultAuthenticatorStateDirectory(), isDirectory: true)
        var authentication = AuthenticationConfiguration.fromEnvironment(dataDirectory: directory)
        if let user { authentication.username = user }
        if !drivers.isEmpty { authentication.readerDrivers = drivers }
        authentication.attemptTimeout = .seconds(timeout)
        return try EmbeddedClient(
            configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: []),
            authentication: authentication, defaultPresenter: TerminalPresenter.environmentDefault())
    }
}

/// A context of `client` holding a passcode credential, asked for on the terminal: what changing the enrolled
/// fingerprints needs, as on Apple's devices.
func passcodeContext(_ client: any SecurityClient, reason: String) async throws -> AuthenticationContextID {
    guard let presenter = TerminalPresenter.environmentDefault() else {
        throw AuthenticationError(
            .notInteractive, "changing fingerprints needs the passcode, and there is no terminal to ask on")
    }
    return try await client.passcodeContext(reason: reason, presenter: presenter)
}

/// Runs `body` in a task that Ctrl-C cancels (the scan then ends with a user-visible cancel).
func cancellableOnInterrupt<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let task = Task { try await body() }
    signal(SIGINT, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    source.setEventHandler { task.cancel() }
    source.resume()
    defer {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
    return try await task.value
}

/// `lactl biometry enroll`: scans a finger with a live stage display.
struct BiometryEnroll: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enroll", abstract: "Enroll a finger (replaces an earlier print of the same finger).")

    @OptionGroup var options: BiometryOptions

    @Option(help: "The finger: \(Finger.allCases.dropFirst().map(\.name).joined(separator: ", ")).")
    var finger = Finger.rightIndex.name

    func run() async throws {
        guard let finger = Finger(name: finger), finger != .unknown else {
            throw ValidationError("unknown finger '\(self.finger)'")
        }
        let client = try options.client()
        do {
            let context = try await passcodeContext(client, reason: "Enroll a fingerprint")
            guard case .reader(let reader) = try await client.send(.reader) else { return }
            print("Enrolling \(finger) on \(reader.name) (\(reader.driver)): scan \(reader.enrollStages) times.")
            let answer = try await cancellableOnInterrupt {
                try await client.send(.enroll(finger, context: context)) { event in
                    switch event {
                    case .enrollment(.stageCompleted(let completed, let total)):
                        print("  scan \(completed)/\(total) ok")
                    case .enrollment(.retry(let reason, let completed, let total, _)):
                        print("  scan \(completed + 1)/\(total): \(reason)")
                    default: break
                    }
                    // Progress shows as it happens, also when the output is a pipe or a file.
                    fflush(nil)
                }
            }
            _ = try await client.send(.closeReader)
            if case .enrolled(let info) = answer { print("Enrolled \(info.finger) as \(info.identifier).") }
        } catch let error as AuthenticationError {
            _ = try? await client.send(.closeReader)
            printError(error)
            throw ExitCode(1)
        }
    }
}

/// `lactl biometry list`: the enrolled prints.
struct BiometryList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List enrolled prints.")

    @OptionGroup var options: BiometryOptions

    func run() async throws {
        guard case .prints(let prints, let stateHash) = try await options.client().send(.enrolledPrints) else { return }
        if prints.isEmpty {
            print("no fingerprint enrolled")
            return
        }
        let formatter = ISO8601DateFormatter()
        for print in prints {
            Swift.print(
                "\(print.identifier)  \(print.finger.name.padding(toLength: 12, withPad: " ", startingAt: 0))  "
                    + "\(print.driver)/\(print.deviceID)  \(formatter.string(from: print.enrolledAt))")
        }
        if let hash = stateHash {
            Swift.print("state hash: \(hash.hexString)")
        }
    }
}

/// `lactl biometry remove <id>`: deletes an enrolled print.
struct BiometryRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an enrolled print.")

    @OptionGroup var options: BiometryOptions

    @Argument(help: "The print's identifier, as `lactl biometry list` shows it.")
    var identifier: String

    func validate() throws {
        guard (try? PrintIdentifier(hex: identifier)) != nil else {
            throw ValidationError(
                "'\(identifier)' is not a print identifier (32 hex digits, see `lactl biometry list`)")
        }
    }

    func run() async throws {
        let identifier = try PrintIdentifier(hex: identifier)
        let client = try options.client()
        do {
            let context = try await passcodeContext(client, reason: "Remove a fingerprint")
            _ = try await client.send(.removePrint(identifier, context: context))
            _ = try await client.send(.closeReader)
            print("removed \(identifier)")
        } catch let error as AuthenticationError {
            _ = try? await client.send(.closeReader)
            printError(error)
            throw ExitCode(1)
        }
    }
}

/// `lactl biometry verify`: waits for a finger and checks it.
struct BiometryVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Scan a finger and check it against the enrolled prints.")

    @OptionGroup var options: BiometryOptions

    func run() async throws {
        let client = try options.client()
        do {
            let answer = try await cancellableOnInterrupt {
                try await client.send(.verifyFinger) { event in
                    switch event {
                    case .verification(.waitingForFinger): print("Place your finger on the reader.")
                    case .verification(.retry(let reason, _)): print("  \(reason)")
                    default: break
                    }
                    // Progress shows as it happens, also when the output is a pipe or a file.
                    fflush(nil)
                }
            }
            _ = try await client.send(.closeReader)
            if case .matched(let matched) = answer { print("match: \(matched.finger) (\(matched.identifier))") }
        } catch let error as AuthenticationError {
            _ = try? await client.send(.closeReader)
            printError(error)
            throw ExitCode(1)
        }
    }
}
