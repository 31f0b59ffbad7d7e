"""Dynamic password configs in ZooKeeper, encrypted with `password.encoder.secret` the
way Kafka's EncryptingPasswordEncoder does, so Kafka and Moldau brokers read each
other's znodes."""

from __future__ import annotations

import base64
import hashlib
import os

from .dynamic_config_error import DynamicConfigError


class PasswordEncoder:
    """Kafka's EncryptingPasswordEncoder: PBKDF2 (HmacSHA512) key from the secret and a
    random 256-byte salt, AES/CBC/PKCS5Padding with a random IV; stored as a CSV map
    ``keyFactoryAlgorithm:..,cipherAlgorithm:..,keyLength:..,salt:..,iterations:..,
    encryptedPassword:..,passwordLength:..,initializationVector:..``."""

    def __init__(self, secret: str, key_factory_algorithm: str | None = None,
                 cipher_algorithm: str = "AES/CBC/PKCS5Padding", key_length: int = 128,
                 iterations: int = 4096) -> None:
        self.secret = secret
        self.key_factory_algorithm = key_factory_algorithm or "PBKDF2WithHmacSHA512"
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations

    @staticmethod
    def _digest(key_factory: str) -> str:
        digests = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA256": "sha256",
                   "PBKDF2WithHmacSHA1": "sha1"}
        if key_factory not in digests:
            raise DynamicConfigError(f"Unsupported password encoder key factory {key_factory}")
        return digests[key_factory]

    def _key(self, key_factory: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        return hashlib.pbkdf2_hmac(self._digest(key_factory), self.secret.encode(), salt,
                                   iterations, key_length // 8)

    @staticmethod
    def _check_cipher(cipher: str) -> None:
        if cipher != "AES/CBC/PKCS5Padding":
            raise DynamicConfigError(f"Unsupported password encoder cipher {cipher}")

    def encode(self, password: str) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        self._check_cipher(self.cipher_algorithm)
        salt = os.urandom(256)
        iv = os.urandom(16)
        key = self._key(self.key_factory_algorithm, salt, self.iterations, self.key_length)
        padder = padding.PKCS7(128).padder()
        data = padder.update(password.encode()) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(data) + encryptor.finalize()
        b64 = base64.b64encode
        fields = {
            "keyFactoryAlgorithm": self.key_factory_algorithm,
            "cipherAlgorithm": self.cipher_algorithm,
            "keyLength": str(self.key_length),
            "salt": b64(salt).decode(),
            "iterations": str(self.iterations),
            "encryptedPassword": b64(encrypted).decode(),
            "passwordLength": str(len(password)),
            "initializationVector": b64(iv).decode(),
        }
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        try:
            params = dict(item.split(":", 1) for item in encoded.split(","))
            self._check_cipher(params["cipherAlgorithm"])
            salt = base64.b64decode(params["salt"])
            iv = base64.b64decode(params["initializationVector"])
            key = self._key(params.get("keyFactoryAlgorithm") or self.key_factory_algorithm,
                            salt, int(params["iterations"]), int(params["keyLength"]))
            decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            padded = decryptor.update(base64.b64decode(params["encryptedPassword"]))
            padded += decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(padded) + unpadder.finalize()).decode()
        except Exception as exc:
            raise DynamicConfigError("Password could not be decoded") from exc
        if len(password) != int(params["passwordLength"]):
            raise DynamicConfigError("Password could not be decoded, sanity check of length "
                                     "failed")
        return password
