// GuardedOperation: a command-line program whose "show-account" command is guarded by an LARight, the login and
// logout flow of Apple's WWDC22 talk "Streamline local authorization flows".
//
//     GuardedOperation login show-account logout show-account
//
// Commands come from the arguments, or one per line from standard input when there are none. `login` asks for a
// fingerprint or the passcode (on the terminal), `show-account` works only while logged in, `logout` ends it.
// For scripts and tests, `--passcode <value>` answers the first passcode prompt instead of the terminal.

import Foundation
import LocalAuthentication

/// The app's account data, shown only to an authorized user.
struct Account {
    /// Whose account it is.
    var holder = "Alice Example"
    /// The account number.
    var number = "DE89 3704 0044 0532 0130 00"
    /// What is on it.
    var balance = "1 234,56 EUR"
}

/// The whole app: one right guards the account.
@MainActor
final class App {
    /// The right `login` authorizes and `logout` deauthorizes: a fingerprint or the device passcode.
    let loginRight = LARight()
    /// What `show-account` shows.
    let account = Account()

    /// An app prompting on the terminal, or answering the first passcode prompt with `scriptedPasscode`.
    init(scriptedPasscode: String?) {
        if let scriptedPasscode {
            // Skip the fingerprint (if a reader is present) and answer the passcode prompt with the given value.
            loginRight.presenter = ScriptedAuthenticationPresenter(
                fingerprintSteps: [.fallback], passcodes: [scriptedPasscode])
        }
    }

    /// Runs one command; returns false for an unknown one.
    func run(_ command: String) async -> Bool {
        switch command {
        case "login":
            do {
                try await loginRight.authorize(localizedReason: "Access sandbox")
                print("login: authorized")
            } catch {
                print("login: failed (\(error.localizedDescription))")
            }
        case "show-account":
            guard loginRight.state == .authorized else {
                print("show-account: refused, log in first")
                return true
            }
            print("show-account: \(account.holder), \(account.number), balance \(account.balance)")
        case "logout":
            await loginRight.deauthorize()
            print("logout: done")
        case "state":
            print("state: \(loginRight.state.name)")
        default:
            print("unknown command '\(command)' (login, show-account, logout, state)")
            return false
        }
        return true
    }
}

extension LARight.State {
    /// The state's name, for printing.
    var name: String {
        switch self {
        case .unknown: "unknown"
        case .authorizing: "authorizing"
        case .authorized: "authorized"
        case .notAuthorized: "notAuthorized"
        @unknown default: "state \(rawValue)"
        }
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var scriptedPasscode: String?
if let index = arguments.firstIndex(of: "--passcode"), index + 1 < arguments.count {
    scriptedPasscode = arguments[index + 1]
    arguments.removeSubrange(index...index + 1)
}

let app = App(scriptedPasscode: scriptedPasscode)
var allKnown = true
if arguments.isEmpty {
    // Interactive: one command per line until end of input.
    while let line = readLine() {
        let command = line.trimmingCharacters(in: .whitespaces)
        if !command.isEmpty, await !app.run(command) { allKnown = false }
    }
} else {
    for command in arguments {
        if await !app.run(command) { allKnown = false }
    }
}
exit(allKnown ? 0 : 2)
