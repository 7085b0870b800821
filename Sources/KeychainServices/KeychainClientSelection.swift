import EmbeddedEngine
import Foundation
import SecurityClient
import SecurityProtocol

/// Which client the SecItem functions and `Keychain.default` talk to.
///
/// By default the client `ClientSelection.fromEnvironment()` gives: the daemon's when one is configured
/// (`LA_DAEMON_SOCKET`, `client.conf`), else an embedded client over the store `EmbeddedConfiguration` names, opened
/// on first use. Code in this package (tests, `lactl`) can bind another client for the duration of a task with
/// `KeychainClientSelection.$current.withValue(client) { … }`, which keeps concurrent tests on separate stores
/// without any process-wide switch.
package enum KeychainClientSelection {
    /// A client bound to the current task, overriding the default.
    @TaskLocal package static var current: (any SecurityClient)?

    private static let shared: Result<any SecurityClient, KeychainStatus> = {
        do {
            return .success(try ClientSelection.fromEnvironment())
        } catch let status as KeychainStatus {
            return .failure(status)
        } catch {
            return .failure(KeychainStatus(.notAvailable, "the keychain cannot be opened"))
        }
    }()

    /// The client for this task. - Throws: `KeychainStatus` when the default store cannot be opened.
    package static func resolve() throws -> any SecurityClient {
        if let current { return current }
        return try shared.get()
    }
}
