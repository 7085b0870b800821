import Foundation
import StoreFiles
import TrustedPlatform

/// Where an enclave keeps its secrets: the software backend (the root key is a 0600 file beside the database, and
/// enclave P-256 keys are opened in this process's memory) or a TPM 2.0 (the root key sealed to it, P-256 keys made
/// and used inside it).
package enum EnclaveBackend: Sendable, Hashable {
    case software
    case tpm(TPM)

    /// A line for people: the backend, and for a TPM its maker and firmware as it reports them now.
    package var description: String {
        guard case .tpm(let tpm) = self else { return summary }
        do {
            let information = try tpm.withConnection { try $0.information() }
            let vendor = information.vendor.isEmpty ? "" : " \(information.vendor)"
            return
                "TPM 2.0 (\(information.manufacturer)\(vendor), firmware \(information.firmware)) through \(tpm.tcti)"
        } catch {
            return "TPM 2.0 through \(tpm.tcti), not answering: \(error)"
        }
    }

    /// The backend in a few words.
    package var summary: String {
        switch self {
        case .software: return "software — keys are files (a copy of the store directory opens anywhere)"
        case .tpm(let tpm): return "TPM 2.0 through \(tpm.tcti)"
        }
    }
}

/// Which backend a store uses, from configuration:
/// - `$LA_ENCLAVE` = `software`, `tpm` or `auto`, and `$LA_TPM_TCTI` (default `device:/dev/tpmrm0`);
/// - else the configuration files (the embedded client's `client.conf`, localauthd's `localauthd.conf`): lines
///   `enclave = software|tpm|auto` and `tpm-tcti = …`, `#` comments;
/// - else `auto`: the TPM when one answers at the TCTI, else software.
///
/// A store keeps the backend it was made with: one whose root key is sealed to a TPM needs that TPM (`software` is
/// then an error, not a fresh key), and a software store stays software under `auto`; `tpm` seals its root key to
/// the TPM (the key file is then overwritten and removed).
package struct EnclaveConfiguration: Sendable, Equatable {
    package enum Choice: String, Sendable {
        case software, tpm, auto
    }

    package var choice: Choice
    package var tcti: String
    /// Where a passcode-protected store's unlocked class keys are kept: the kernel keyring (embedded clients, many
    /// processes of one user) or the process (localauthd).
    package var unlockedKeys: UnlockedKeyHolding = .kernelKeyring

    package init(choice: Choice = .auto, tcti: String = TPM.defaultTCTI) {
        self.choice = choice
        self.tcti = tcti
    }

    /// The software backend, whatever the machine has (tests, `--data-dir` stores made for inspection).
    package static let software = EnclaveConfiguration(choice: .software)

    /// The configuration the environment and then the first of `files` that names one give.
    ///
    /// - Throws: `EnclaveError(.configuration)` for a value that is neither `software`, `tpm` nor `auto`.
    package static func from(
        environment: [String: String] = ProcessInfo.processInfo.environment, files: [String]
    ) throws -> EnclaveConfiguration {
        var configuration = EnclaveConfiguration()
        var choice: String?
        var tcti: String?
        for path in files {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            for entry in DataLocations.configurationEntries(text) {
                if entry.key == "enclave" && choice == nil { choice = entry.value }
                if entry.key == "tpm-tcti" && tcti == nil { tcti = entry.value }
            }
        }
        if let value = environment["LA_ENCLAVE"], !value.isEmpty { choice = value }
        if let value = environment["LA_TPM_TCTI"], !value.isEmpty { tcti = value }
        if let choice {
            guard let parsed = Choice(rawValue: choice) else {
                throw EnclaveError(.configuration, "the enclave must be software, tpm or auto, not \(choice)")
            }
            configuration.choice = parsed
        }
        if let tcti { configuration.tcti = tcti }
        return configuration
    }

    /// The embedded client's configuration: the environment, then `$XDG_CONFIG_HOME/local-authentication/client.conf`
    /// (or `~/.config/…`), then `/etc/local-authentication/client.conf`.
    package static func embedded(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> EnclaveConfiguration {
        try from(environment: environment, files: DataLocations.clientConfigurationFiles(environment))
    }

    /// The TPM this configuration names (whether or not it is chosen).
    package var tpm: TPM { TPM(tcti: tcti) }

    /// The backend for a new store: `auto` asks the TPM whether it answers.
    func backendForNewStore() -> EnclaveBackend {
        switch choice {
        case .software: return .software
        case .tpm: return .tpm(tpm)
        case .auto: return tpm.answers() ? .tpm(tpm) : .software
        }
    }
}
