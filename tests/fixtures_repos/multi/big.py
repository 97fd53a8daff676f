def big_0():
    return 0

def big_1():
    return 1

def big_2():
    return 2

def big_3():
    return 3

def big_4():
    return 4

def big_5():
    return 5

def big_6():
    return 6

def big_7():
    return 7

def big_8():
    return 8

def big_9():
    return 9

def big_10():
    return 10

def big_11():
    return 11

def big_12():
    return 12

def big_13():
    return 13

def big_14():
    return 14

def big_15():
    return 15

def big_16():
    return 16

def big_17():
    return 17

def big_18():
    return 18

def big_19():
    return 19

def big_20():
    return 20

def big_21():
    return 21

def big_22():
    return 22

def big_23():
    return 23

def big_24():
    return 24

def big_25():
    return 25

def big_26():
    return 26

def big_27():
    return 27

def big_28():
    return 28

def big_29():
    return 29

def big_30():
    return 30

def big_31():
    return 31

def big_32():
    return 32

def big_33():
    return 33

def big_34():
    return 34

def big_35():
    return 35

def big_36():
    return 36

def big_37():
    return 37

def big_38():
    return 38

def big_39():
    return 39

def big_40():
    return 40

def big_41():
    return 41

def big_42():
    return 42

def big_43():
    return 43

def big_44():
    return 44

def big_45():
    return 45

def big_46():
    return 46

def big_47():
    return 47

def big_48():
    return 48

def big_49():
    return 49

def big_50():
    return 50

def big_51():
    return 51

def big_52():
    return 52

def big_53():
    return 53

def big_54():
    return 54

def big_55():
    return 55

def big_56():
    return 56

def big_57():
    return 57

def big_58():
    return 58

def big_59():
    return 59

def big_60():
    return 60

def big_61():
    return 61

def big_62():
    return 62

def big_63():
    return 63

def big_64():
    return 64

def big_65():
    return 65

def big_66():
    return 66

def big_67():
    return 67

def big_68():
    return 68

def big_69():
    return 69

def big_70():
    return 70

def big_71():
    return 71

def big_72():
    return 72

def big_73():
    return 73

def big_74():
    return 74

def big_75():
    return 75

def big_76():
    return 76

def big_77():
    return 77

def big_78():
    return 78

def big_79():
    return 79

def big_80():
    return 80

def big_81():
    return 81

def big_82():
    return 82

def big_83():
    return 83

def big_84():
    return 84

def big_85():
    return 85

def big_86():
    return 86

def big_87():
    return 87

def big_88():
    return 88

def big_89():
    return 89

def big_90():
    return 90

def big_91():
    return 91

def big_92():
    return 92

def big_93():
    return 93

def big_94():
    return 94

def big_95():
    return 95

def big_96():
    return 96

def big_97():
    return 97

def big_98():
    return 98

def big_99():
    return 99

def big_100():
    return 100

def big_101():
    return 101

def big_102():
    return 102

def big_103():
    return 103

def big_104():
    return 104

def big_105():
    return 105

def big_106():
    return 106

def big_107():
    return 107

def big_108():
    return 108

def big_109():
    return 109

def big_110():
    return 110

def big_111():
    return 111

def big_112():
    return 112

def big_113():
    return 113

def big_114():
    return 114

def big_115():
    return 115

def big_116():
    return 116

def big_117():
    return 117

def big_118():
    return 118

def big_119():
    return 119

def big_120():
    return 120

def big_121():
    return 121

def big_122():
    return 122

def big_123():
    return 123

def big_124():
    return 124

def big_125():
    return 125

def big_126():
    return 126

def big_127():
    return 127

def big_128():
    return 128

def big_129():
    return 129

def big_130():
    return 130

def big_131():
    return 131

def big_132():
    return 132

def big_133():
    return 133

def big_134():
    return 134

def big_135():
    return 135

def big_136():
    return 136

def big_137():
    return 137

def big_138():
    return 138

def big_139():
    return 139

def big_140():
    return 140

def big_141():
    return 141

def big_142():
    return 142

def big_143():
    return 143

def big_144():
    return 144

def big_145():
    return 145

def big_146():
    return 146

def big_147():
    return 147

def big_148():
    return 148

def big_149():
    return 149

def big_150():
    return 150

def big_151():
    return 151

def big_152():
    return 152

def big_153():
    return 153

def big_154():
    return 154

def big_155():
    return 155

def big_156():
    return 156

def big_157():
    return 157

def big_158():
    return 158

def big_159():
    return 159

def big_160():
    return 160

def big_161():
    return 161

def big_162():
    return 162

def big_163():
    return 163

def big_164():
    return 164

def big_165():
    return 165

def big_166():
    return 166

def big_167():
    return 167

def big_168():
    return 168

def big_169():
    return 169

def big_170():
    return 170

def big_171():
    return 171

def big_172():
    return 172

def big_173():
    return 173

def big_174():
    return 174

def big_175():
    return 175

def big_176():
    return 176

def big_177():
    return 177

def big_178():
    return 178

def big_179():
    return 179

def big_180():
    return 180

def big_181():
    return 181

def big_182():
    return 182

def big_183():
    return 183

def big_184():
    return 184

def big_185():
    return 185

def big_186():
    return 186

def big_187():
    return 187

def big_188():
    return 188

def big_189():
    return 189

def big_190():
    return 190

def big_191():
    return 191

def big_192():
    return 192

def big_193():
    return 193

def big_194():
    return 194

def big_195():
    return 195

def big_196():
    return 196

def big_197():
    return 197

def big_198():
    return 198

def big_199():
    return 199

def big_200():
    return 200

def big_201():
    return 201

def big_202():
    return 202

def big_203():
    return 203

def big_204():
    return 204

def big_205():
    return 205

def big_206():
    return 206

def big_207():
    return 207

def big_208():
    return 208

def big_209():
    return 209

def big_210():
    return 210

def big_211():
    return 211

def big_212():
    return 212

def big_213():
    return 213

def big_214():
    return 214

def big_215():
    return 215

def big_216():
    return 216

def big_217():
    return 217

def big_218():
    return 218

def big_219():
    return 219

def big_220():
    return 220

def big_221():
    return 221

def big_222():
    return 222

def big_223():
    return 223

def big_224():
    return 224

def big_225():
    return 225

def big_226():
    return 226

def big_227():
    return 227

def big_228():
    return 228

def big_229():
    return 229

def big_230():
    return 230

def big_231():
    return 231

def big_232():
    return 232

def big_233():
    return 233

def big_234():
    return 234

def big_235():
    return 235

def big_236():
    return 236

def big_237():
    return 237

def big_238():
    return 238

def big_239():
    return 239

def big_240():
    return 240

def big_241():
    return 241

def big_242():
    return 242

def big_243():
    return 243

def big_244():
    return 244

def big_245():
    return 245

def big_246():
    return 246

def big_247():
    return 247

def big_248():
    return 248

def big_249():
    return 249

def big_250():
    return 250

def big_251():
    return 251

def big_252():
    return 252

def big_253():
    return 253

def big_254():
    return 254

def big_255():
    return 255

def big_256():
    return 256

def big_257():
    return 257

def big_258():
    return 258

def big_259():
    return 259

def big_260():
    return 260

def big_261():
    return 261

def big_262():
    return 262

def big_263():
    return 263

def big_264():
    return 264

def big_265():
    return 265

def big_266():
    return 266

def big_267():
    return 267

def big_268():
    return 268

def big_269():
    return 269

def big_270():
    return 270

def big_271():
    return 271

def big_272():
    return 272

def big_273():
    return 273

def big_274():
    return 274

def big_275():
    return 275

def big_276():
    return 276

def big_277():
    return 277

def big_278():
    return 278

def big_279():
    return 279

def big_280():
    return 280

def big_281():
    return 281

def big_282():
    return 282

def big_283():
    return 283

def big_284():
    return 284

def big_285():
    return 285

def big_286():
    return 286

def big_287():
    return 287

def big_288():
    return 288

def big_289():
    return 289

def big_290():
    return 290

def big_291():
    return 291

def big_292():
    return 292

def big_293():
    return 293

def big_294():
    return 294

def big_295():
    return 295

def big_296():
    return 296

def big_297():
    return 297

def big_298():
    return 298

def big_299():
    return 299

def big_300():
    return 300

def big_301():
    return 301

def big_302():
    return 302

def big_303():
    return 303

def big_304():
    return 304

def big_305():
    return 305

def big_306():
    return 306

def big_307():
    return 307

def big_308():
    return 308

def big_309():
    return 309

def big_310():
    return 310

def big_311():
    return 311

def big_312():
    return 312

def big_313():
    return 313

def big_314():
    return 314

def big_315():
    return 315

def big_316():
    return 316

def big_317():
    return 317

def big_318():
    return 318

def big_319():
    return 319

def big_320():
    return 320

def big_321():
    return 321

def big_322():
    return 322

def big_323():
    return 323

def big_324():
    return 324

def big_325():
    return 325

def big_326():
    return 326

def big_327():
    return 327

def big_328():
    return 328

def big_329():
    return 329

def big_330():
    return 330

def big_331():
    return 331

def big_332():
    return 332

def big_333():
    return 333

def big_334():
    return 334

def big_335():
    return 335

def big_336():
    return 336

def big_337():
    return 337

def big_338():
    return 338

def big_339():
    return 339

def big_340():
    return 340

def big_341():
    return 341

def big_342():
    return 342

def big_343():
    return 343

def big_344():
    return 344

def big_345():
    return 345

def big_346():
    return 346

def big_347():
    return 347

def big_348():
    return 348

def big_349():
    return 349

def big_350():
    return 350

def big_351():
    return 351

def big_352():
    return 352

def big_353():
    return 353

def big_354():
    return 354

def big_355():
    return 355

def big_356():
    return 356

def big_357():
    return 357

def big_358():
    return 358

def big_359():
    return 359

def big_360():
    return 360

def big_361():
    return 361

def big_362():
    return 362

def big_363():
    return 363

def big_364():
    return 364

def big_365():
    return 365

def big_366():
    return 366

def big_367():
    return 367

def big_368():
    return 368

def big_369():
    return 369

def big_370():
    return 370

def big_371():
    return 371

def big_372():
    return 372

def big_373():
    return 373

def big_374():
    return 374

def big_375():
    return 375

def big_376():
    return 376

def big_377():
    return 377

def big_378():
    return 378

def big_379():
    return 379

def big_380():
    return 380

def big_381():
    return 381

def big_382():
    return 382

def big_383():
    return 383

def big_384():
    return 384

def big_385():
    return 385

def big_386():
    return 386

def big_387():
    return 387

def big_388():
    return 388

def big_389():
    return 389

def big_390():
    return 390

def big_391():
    return 391

def big_392():
    return 392

def big_393():
    return 393

def big_394():
    return 394

def big_395():
    return 395

def big_396():
    return 396

def big_397():
    return 397

def big_398():
    return 398

def big_399():
    return 399

