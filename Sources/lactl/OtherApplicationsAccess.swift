import Foundation
import KeychainServices
import LocalAuthentication
import SecurityClient
import SecurityProtocol
import WorkThreads

/// Which access groups a keychain subcommand acts in.
enum KeychainReach {
    /// lactl's own groups, and those `$LA_ACCESS_GROUPS` names.
    case claimed
    /// Those, and the group `-G` names (nil: none named).
    case group(String?)
    /// Every group of the user (`dump`, `export`, `import`, `rights`).
    case everyGroup
}

/// The user's consent before lactl, through localauthd, acts on other applications' items.
///
/// Any program of the user can run lactl and choose what it claims, so localauthd grants lactl (an administrative
/// tool) only its own access groups at the hello, and holds back the rest. When a command reaches further — groups
/// `$LA_ACCESS_GROUPS` or `-G` names beyond lactl's own, or every group — lactl asks the user once, through an
/// `LAContext` on the same connection (finger or passcode, checked by the daemon), and then asks the daemon to
/// widen the connection (`widenAccessGroups`), which it does only for a context of that connection the user just
/// authenticated in. On macOS `security` meets an access prompt in the same place. Embedded, lactl runs as the user
/// who owns the files, and nothing is asked.
enum OtherApplicationsAccess {
    /// What a refused or failed authorization reports.
    static let operation = "use the items of other applications (allowed only with your finger or passcode)"

    /// Asks the user, when `client`'s connection holds less than `claimed` (or every group, with `everyGroup`),
    /// and widens the connection once the user authenticated. Reads lactl's own groups without asking.
    ///
    /// - Throws: `KeychainCommandFailure`: `errSecInteractionNotAllowed` with nobody to ask (no terminal, or
    ///   `LA_PRESENTER=none`), `errSecUserCanceled` when the user cancels, `errSecAuthFailed` for a finger or
    ///   passcode not recognised or a widening the daemon refused. Nothing is changed then.
    static func request(_ client: SocketClient, claimed: [String], everyGroup: Bool) throws {
        guard everyGroup || !claimed.isEmpty else { return }
        let held: CallerInfo
        do {
            guard case .caller(let info) = try BlockingBridge.wait({ try await client.send(.callerIdentity) }) else {
                throw KeychainCommandFailure(status: errSecInternalComponent, operation: operation)
            }
            held = info
        } catch let failure as KeychainCommandFailure {
            throw failure
        } catch {
            throw failure(error)
        }
        let beyond = claimed.filter { !held.accessGroups.contains($0) }
        guard !held.mayAccessAllGroups, everyGroup || !beyond.isEmpty else { return }
        let reason =
            everyGroup
            ? "lactl wants to use the items of every application"
            : "lactl wants to use the items of \(beyond.joined(separator: ", "))"
        let context = KeychainClientSelection.$current.withValue(client) { LAContext() }
        defer { context.invalidate() }
        do {
            _ = try BlockingBridge.wait {
                try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: reason)
            }
            let id = try context.authenticationContextID()
            _ = try BlockingBridge.wait { try await client.send(.widenAccessGroups(context: id)) }
        } catch {
            throw failure(error)
        }
    }

    /// `error` (the evaluation's `LAError`, or the daemon's refusal) as the command's failure, its reason on
    /// standard error first.
    private static func failure(_ error: any Error) -> KeychainCommandFailure {
        let status: KeychainStatus
        switch error {
        case let error as LAError:
            let code = AuthenticationError.Code(rawValue: error.code.rawValue)
            status = KeychainStatus(authenticationFailure: AuthenticationError(code, error.localizedDescription))
        default:
            status = KeychainStatus(authenticationFailure: error)
        }
        FileHandle.standardError.write(Data("lactl: \(status.message)\n".utf8))
        return KeychainCommandFailure(status: status.code.rawValue, operation: operation)
    }
}
