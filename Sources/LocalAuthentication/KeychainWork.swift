import KeychainServices
import SecurityClient
import SecurityProtocol
import WorkThreads

/// Runs `body`, which calls Apple's synchronous `SecItem` and `SecKey` functions, on a thread that may block, with
/// the task's keychain client bound there too: how this module's async members use the keychain without holding a
/// thread of Swift's cooperative pool while the engine works or a prompt waits for the user.
func keychainWork<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
    let client = KeychainClientSelection.current
    return try await BlockingWork.run { try KeychainClientSelection.$current.withValue(client) { try body() } }
}
