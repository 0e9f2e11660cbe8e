/* SPDX-License-Identifier: MIT */ /* placeholder */ typedef int kdp__placeholder_sock;
