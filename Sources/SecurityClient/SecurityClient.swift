import Foundation
import SecurityServer

/// Sends requests to the engine and returns its answers: in-process (`EmbeddedClient`) or, later, over the
/// daemon's socket. Both public APIs (SecItem dictionaries and the typed Swift API) go through this.
package protocol SecurityClient: Sendable {
    /// Serves one keychain request. Blocks the calling thread until the engine answers.
    ///
    /// - Throws: `KeychainStatus` carrying the `OSStatus` Keychain Services reports.
    func send(_ request: KeychainRequest) throws -> KeychainResponse

    /// Serves one enclave-key request (generate, sign, decrypt, key exchange). Blocks until the engine answers.
    ///
    /// - Throws: `KeychainStatus` carrying the `OSStatus` the `SecKey` functions report.
    func send(_ request: KeyRequest) throws -> KeyResponse

    /// Keychain events the caller may see, from now on.
    func keychainEvents() -> AsyncStream<EngineEvent>
}
