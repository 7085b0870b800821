import EmbeddedEngine
import Enclave
import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import TestSupport
import Testing
import TrustedPlatform

/// The TPM backend as an attacker meets it: a copy of the whole store directory, taken to another TPM, to the
/// software backend, or handed a key from another store, opens nothing; a software store moves into the TPM.
@Suite(.enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (scripts/bootstrap installs it)"))
final class TPMEnclaveTests {
    let machine: SoftwareTPM
    /// The store, in a scratch directory that also holds its copies.
    let directory: URL

    init() throws {
        machine = try SoftwareTPM()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tpm-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        directory = scratch.appendingPathComponent("store")
    }

    deinit {
        try? FileManager.default.removeItem(at: directory.deletingLastPathComponent())
    }

    var onThisTPM: EnclaveConfiguration { EnclaveConfiguration(choice: .tpm, tcti: machine.tcti) }

    @Test func aCopiedStoreOpensOnNoOtherTPM() throws {
        let client = try Self.client(directory, onThisTPM)
        _ = try client.sendBlocking(.add(Self.item("a", data: "copied-secret-marker")))
        let handle = try Self.generateKey(client)
        let copy = try Self.copy(directory)

        // The same TPM opens the copy (a copy on this machine is this machine's store)...
        #expect(try Self.password(try Self.client(copy, onThisTPM), "a") == "copied-secret-marker")
        // ...another TPM does not, nor the software backend, nor `auto` on a machine whose TPM is another one.
        let other = try SoftwareTPM()
        for configuration in [
            EnclaveConfiguration(choice: .tpm, tcti: other.tcti), EnclaveConfiguration(choice: .auto, tcti: other.tcti),
        ] {
            let status = Self.status { _ = try Self.client(copy, configuration) }
            #expect(status?.code == .decode)
            #expect(status?.message.contains("sealed to another TPM") == true, "\(String(describing: status))")
        }
        let software = Self.status { _ = try Self.client(copy, .software) }
        #expect(software?.code == .notAvailable)
        #expect(software?.message.contains("sealed to a TPM") == true)
        #expect(FileManager.default.fileExists(atPath: copy.appendingPathComponent("device.tpm").path))
        #expect(!FileManager.default.fileExists(atPath: copy.appendingPathComponent("device.key").path))

        // The key's handle, given to a store of the other TPM, signs nothing.
        let foreign = try Self.client(
            Self.copy(directory, fresh: true), EnclaveConfiguration(choice: .tpm, tcti: other.tcti))
        let refused = Self.status {
            _ = try foreign.sendBlocking(KeyRequest.sign(handle: handle, digest: Data(count: 32), context: nil))
        }
        #expect(refused?.code == .decode, "\(String(describing: refused))")
    }

    /// The same attack through real processes: `lactl` on the copy with the other TPM configured.
    @Test func lactlOnACopyWithAnotherTPMPrintsNoSecret() throws {
        let lactl = try lactlExecutable()
        var environment = inheritedEnvironment(merging: machine.environment)
        environment["LA_DAEMON_SOCKET"] = ""
        let add = try runCapturingOutput(
            lactl,
            [
                "keychain", "add-generic-password", "--data-dir", directory.path, "-s", "svc", "-a", "a", "-w",
                "lactl-secret-marker",
            ], environment: environment)
        #expect(add.status == 0, "\(add.output)")
        let copy = try Self.copy(directory)
        let find = ["keychain", "find-generic-password", "--data-dir", copy.path, "-s", "svc", "-a", "a", "-w"]
        let same = try runCapturingOutput(lactl, find, environment: environment)
        #expect(same.status == 0 && same.output.contains("lactl-secret-marker"), "\(same.output)")

        let other = try SoftwareTPM()
        environment["LA_TPM_TCTI"] = other.tcti
        let stolen = try runCapturingOutput(lactl, find, environment: environment)
        #expect(stolen.status != 0)
        #expect(!stolen.output.contains("lactl-secret-marker"))
        #expect(stolen.output.contains("sealed to another TPM"), "\(stolen.output)")
    }

    @Test func lactlStatusNamesTheBackend() throws {
        var environment = inheritedEnvironment(merging: machine.environment)
        environment["LA_DAEMON_SOCKET"] = ""
        environment["LA_DATA_DIR"] = directory.path
        let onTPM = try runCapturingOutput(try lactlExecutable(), ["status"], environment: environment)
        #expect(onTPM.output.contains("keys: TPM 2.0 (IBM SW TPM, firmware "), "\(onTPM.output)")
        environment["LA_ENCLAVE"] = "software"
        environment["LA_DATA_DIR"] = directory.path + "-software"
        let inSoftware = try runCapturingOutput(try lactlExecutable(), ["status"], environment: environment)
        #expect(inSoftware.output.contains("keys: software — keys are files"), "\(inSoftware.output)")
    }

    @Test func aSoftwareStoreMovesIntoTheTPM() throws {
        let software = try Self.client(directory, .software)
        _ = try software.sendBlocking(.add(Self.item("a", data: "moved")))
        let handle = try Self.generateKey(software)
        #expect(try EnclaveKey(serialized: handle).isTPMHeld == false)
        let keyFile = directory.appendingPathComponent("device.key").path
        #expect(FileManager.default.fileExists(atPath: keyFile))

        let moved = try Self.client(directory, onThisTPM)
        #expect(!FileManager.default.fileExists(atPath: keyFile), "the key file is gone once the TPM holds the key")
        #expect(try Self.password(moved, "a") == "moved")
        // A key made in software before the move still signs (its scalar is sealed under the same root key); new
        // keys are the TPM's.
        guard
            case .signature = try moved.sendBlocking(
                KeyRequest.sign(handle: handle, digest: Data(count: 32), context: nil))
        else { throw TPMTestFailure.unexpectedResponse }
        #expect(try EnclaveKey(serialized: try Self.generateKey(moved)).isTPMHeld)
        // From now on the directory is as useless elsewhere as a store made on the TPM.
        let other = try SoftwareTPM()
        #expect(
            Self.status {
                _ = try Self.client(try Self.copy(directory), EnclaveConfiguration(choice: .tpm, tcti: other.tcti))
            }?.code == .decode)
    }

    @Test func aSealedStoreWhoseTPMIsGoneSaysSo() throws {
        _ = try Self.client(directory, onThisTPM)
        let gone = EnclaveConfiguration(choice: .tpm, tcti: "swtpm:path=\(directory.path)-no-such-socket")
        let status = Self.status { _ = try Self.client(directory, gone) }
        #expect(status?.code == .notAvailable)
        #expect(status?.message.contains("does not answer") == true, "\(String(describing: status))")
    }

    @Test func autoWithoutATPMIsSoftwareAndSaysSo() throws {
        let absent = EnclaveConfiguration(choice: .auto, tcti: "swtpm:path=\(directory.path)-no-such-socket")
        let enclave = try Enclave(directory: directory, configuration: absent)
        #expect(enclave.backend == .software)
        #expect(enclave.backend.summary.hasPrefix("software — keys are files"))
        // A new store on `auto` goes into a TPM that answers; an existing software store stays software (only an
        // explicit `tpm` moves it in).
        let autoTPM = EnclaveConfiguration(choice: .auto, tcti: machine.tcti)
        #expect(
            try Enclave(directory: try Self.copy(directory, fresh: true), configuration: autoTPM).backend
                == .tpm(TPM(tcti: machine.tcti)))
        #expect(try Enclave(directory: directory, configuration: autoTPM).backend == .software)
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("device.key").path))
    }

    @Test func configurationComesFromTheEnvironmentThenTheFile() throws {
        let file = directory.path + ".conf"
        try "# the TPM\nenclave = tpm\ntpm-tcti = swtpm:path=/run/x\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        #expect(
            try EnclaveConfiguration.from(environment: [:], files: [file])
                == EnclaveConfiguration(choice: .tpm, tcti: "swtpm:path=/run/x"))
        #expect(
            try EnclaveConfiguration.from(environment: ["LA_ENCLAVE": "software"], files: [file]).choice == .software)
        #expect(
            try EnclaveConfiguration.from(environment: [:], files: [])
                == EnclaveConfiguration(choice: .auto, tcti: "device:/dev/tpmrm0"))
        #expect(throws: EnclaveError.self) {
            try EnclaveConfiguration.from(environment: ["LA_ENCLAVE": "hardware"], files: [])
        }
    }

    // MARK: Helpers

    enum TPMTestFailure: Error { case unexpectedResponse }

    static func client(_ directory: URL, _ configuration: EnclaveConfiguration) throws -> EmbeddedClient {
        let engine = try KeychainEngine(directory: directory, enclave: configuration)
        return EmbeddedClient(engine: engine, caller: CallerIdentity(accessGroups: ["test.tpm"]))
    }

    static func item(_ account: String, data: String? = nil) -> [String: KeychainValue] {
        var item: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("tpm"), "acct": .string(account),
        ]
        if let data { item["v_Data"] = .secret(SecureBytes(Array(data.utf8))) }
        return item
    }

    static func password(_ client: EmbeddedClient, _ account: String) throws -> String? {
        var query = item(account)
        query["r_Data"] = .bool(true)
        guard case .items(let results) = try client.sendBlocking(.copyMatching(query)),
            let data = results.items.first?.data
        else { return nil }
        return String(decoding: data.unprotectedData(), as: UTF8.self)
    }

    static func generateKey(_ client: EmbeddedClient) throws -> Data {
        guard
            case .generated(let handle, _) = try client.sendBlocking(
                KeyRequest.generate(accessControl: nil, item: nil, context: nil))
        else { throw TPMTestFailure.unexpectedResponse }
        return handle
    }

    /// A copy of the whole store directory (or, `fresh`, an empty directory beside it).
    static func copy(_ directory: URL, fresh: Bool = false) throws -> URL {
        let copy = directory.deletingLastPathComponent().appendingPathComponent("copy-\(UUID().uuidString)")
        if !fresh { try FileManager.default.copyItem(at: directory, to: copy) }
        return copy
    }

    static func status(_ body: () throws -> Void) -> KeychainStatus? {
        do {
            try body()
            return nil
        } catch let status as KeychainStatus {
            return status
        } catch {
            return KeychainStatus(.internalComponent, "\(error)")
        }
    }
}
