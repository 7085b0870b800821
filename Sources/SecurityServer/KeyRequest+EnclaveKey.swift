import Enclave
import Foundation
import SecurityProtocol

extension KeyRequest {
    /// The public key (`04 || X || Y`) an enclave-key handle names, read without opening the key; nil when
    /// `handle` is not an enclave key.
    package static func publicKey(ofHandle handle: Data) -> Data? {
        try? EnclaveKey(serialized: handle).publicKey
    }
}
