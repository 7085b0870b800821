import Foundation
import SecurityProtocol
import StoreFiles

/// Where authenticator state lives by default: the store's directory (``DataLocations/dataDirectory(_:)``), so
/// `lactl biometry` and the engine see the same prints.
package func defaultAuthenticatorStateDirectory() -> String {
    DataLocations.dataDirectory().path
}

extension AuthenticationError {
    /// A store file that cannot be created, read, written or trusted: the state cannot be read (`invalidContext`).
    package init(_ failure: PrivateFileError) {
        self.init(
            .invalidContext, failure.message,
            backendStatus: failure.errno.map { .init(library: "system", code: Int($0)) })
    }
}

/// Runs `body`, reporting a store-file failure as an ``AuthenticationError``.
func withStateFiles<Result: ~Copyable>(_ body: () throws -> Result) throws -> Result {
    do {
        return try body()
    } catch let failure as PrivateFileError {
        throw AuthenticationError(failure)
    }
}
